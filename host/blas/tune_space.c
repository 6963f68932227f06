/*
 * tune_space.c - CLBlast's GEMM parameters the tuner searches, and the
 * constraints (CLBlast's tuner's, plus the device's limits) a set must meet.
 */
#include "tune_space.h"

/* CLBlast's extended tuning sets, with 4-wide work-groups added for CPUs. */
const lf_space lf__tune_spaces[K_COUNT] = {
    {"Xgemm", 16,
     {"GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA", "SB", "STRM", "STRN",
      "VWM", "VWN"},
     {{0}, {1}, {16, 32}, {2}, {4, 8, 16, 32}, {4, 8, 16, 32}, {16, 32, 64, 128}, {4, 8, 16, 32}, {4, 8, 16, 32},
      {16, 32, 64, 128}, {0, 1}, {0, 1}, {0, 1}, {0, 1}, {1, 2, 4, 8}, {1, 2, 4, 8}}},
    {"XgemmDirect", 10,
     {"KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB", "VWMD", "VWND", "WGD"},
     {{2, 8, 16}, {4, 8, 16, 32}, {4, 8, 16, 32}, {4, 8, 16, 32}, {4, 8, 16, 32}, {0, 1}, {0, 1}, {1, 2, 4, 8},
      {1, 2, 4, 8}, {8, 16, 32, 64}}},
    {"GemmRoutine", 1, {"XGEMM_MIN_INDIRECT_SIZE"}, {{0}}},
};

const char *const lf__gemm_class_names[C_COUNT] = {"tile", "sum", "head"};

int lf__gemm_class(size_t m, size_t n, size_t k)
{
    const size_t side = m > n ? m : n, least = m < n ? (m < k ? m : k) : (n < k ? n : k);
    if (k >= 4 * side) return C_SUM;
    return least <= 128 ? C_HEAD : C_TILE;
}

static bool multiple(size_t x, size_t of) { return of != 0 && x % of == 0; }

/* How many values parameter i of s searches (its 0-terminated choices; a lone 0 counts). */
static int choice_count(const lf_space *s, int i)
{
    int n = 1;
    while (n < 6 && s->choices[i][n]) n++;
    return n;
}

/* CLBlast's tuner constraints, plus what the device allows. */
static bool xgemm_valid(const size_t *v, const lf_device_info *d)
{
    const size_t KWG = v[2], KWI = v[3], MDIMA = v[4], MDIMC = v[5], MWG = v[6], NDIMB = v[7], NDIMC = v[8],
                 NWG = v[9], SA = v[10], SB = v[11], VWM = v[14], VWN = v[15];
    const size_t local = (SA * KWG * MWG + SB * KWG * NWG) * sizeof(float);
    return multiple(KWG, KWI) && multiple(MWG, MDIMC * VWM) && multiple(NWG, NDIMC * VWN) &&
           multiple(MWG, MDIMA * VWM) && multiple(NWG, NDIMB * VWN) && multiple(KWG, MDIMC * NDIMC / MDIMA) &&
           multiple(KWG, MDIMC * NDIMC / NDIMB) && MDIMC * NDIMC <= d->max_work_group_size &&
           local <= d->local_mem_bytes;
}

static bool direct_valid(const size_t *v, const lf_device_info *d)
{
    const size_t KWID = v[0], MDIMAD = v[1], MDIMCD = v[2], NDIMBD = v[3], NDIMCD = v[4], PADA = v[5],
                 PADB = v[6], VWMD = v[7], VWND = v[8], WGD = v[9];
    const size_t local = (WGD * (WGD + PADA) + WGD * (WGD + PADB)) * sizeof(float);
    return multiple(WGD, KWID) && multiple(WGD, MDIMCD * VWMD) && multiple(WGD, NDIMCD * VWND) &&
           multiple(WGD, MDIMAD * VWMD) && multiple(WGD, NDIMBD * VWND) &&
           multiple(WGD, MDIMCD * NDIMCD / MDIMAD) && multiple(WGD, MDIMCD * NDIMCD / NDIMBD) &&
           MDIMCD * NDIMCD <= d->max_work_group_size && local <= d->local_mem_bytes;
}

bool lf__tune_stored_valid(int kernel, const size_t *v, const lf_device_info *d)
{
    if (kernel == K_ROUTINE) return v[0] <= LF_ALWAYS_DIRECT;
    const lf_space *s = &lf__tune_spaces[kernel];
    for (int i = 0; i < s->count; i++) {
        bool among = false;
        for (int n = 0; n < choice_count(s, i); n++) among |= s->choices[i][n] == v[i];
        if (!among) return false;
    }
    return kernel == K_XGEMM ? xgemm_valid(v, d) : direct_valid(v, d);
}

bool lf__tune_random_set(int kernel, const lf_device_info *d, uint64_t *rng, size_t *v)
{
    const lf_space *s = &lf__tune_spaces[kernel];
    for (int attempt = 0; attempt < 10000; attempt++) {
        for (int i = 0; i < s->count; i++) v[i] = s->choices[i][lf__rand_next(rng) % (uint64_t)choice_count(s, i)];
        if (kernel == K_XGEMM ? xgemm_valid(v, d) : direct_valid(v, d)) return true;
    }
    return false;
}
