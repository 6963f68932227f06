/*
 * attention.cl - attention tiled over keys with an online softmax.
 *
 * Each work-item owns one query row and keeps its running max m, running sum l
 * and the weighted value sum acc in registers; the work-group stages TK keys
 * and values at a time in local memory. No score matrix ever reaches global
 * memory. The same kernel serves two modes:
 *   flash:     keys are the sequence itself, the first len[b] of them count;
 *   linformer: keys are the k compressed rows (key_count = k), all of them count.
 * With CAUSAL, query i sees only what precedes it:
 *   flash:     keys 0..i; key tiles wholly after the work-group's last row are
 *              never loaded;
 *   linformer: in one softmax, the slots of the complete windows before its
 *              own (j < i / w), then the exact keys of its own window up to
 *              itself (sk, sv: the sequence's own keys and values, positions
 *              i / w * w .. i).
 * Rows at or past len[b] are written as 0, and so is a row with no keys.
 *
 * q[b, i, h*DH + d] at q + q_off + b*q_bstride + i*q_ld, likewise k, v, o, sk, sv.
 * Global: (rows rounded up to TQ, times DS; heads, batch), local (TQ DS, 1, 1).
 *
 * With DS > 1 (d-split) DS neighbouring work-items share a query, each
 * holding DH / DS of its row and sums: for each staged key each writes its
 * partial dot product to local memory, and after a barrier each adds the DS
 * partials and runs the same online softmax (the same m, l and corrections
 * in all DS) on its own slice of the values. The GPU compilers keep 2 DH / DS
 * floats a work-item in registers where 2 DH went to scratch memory.
 *
 * With QB > 1 (the CPU variant, chosen by the plan for CPU devices) a
 * work-item owns QV vectors of QB consecutive queries instead, one query per
 * lane, and reads keys and values straight from global memory (they stay in
 * cache): no local memory, no barriers, and every key element is loaded once
 * for QV QB queries and broadcast across the lanes, so the compiler's
 * vectors are full whatever DH is, and a pass over DH does QV FMAs for each
 * load of a key. Global: (ceil(rows / (QV QB)) rounded up to local[0],
 * heads, batch), local of TQ work-items in all, across heads where they
 * divide them (the kernel reads only global ids).
 */

/* Build parameters (the layer's plan sets them; these defaults let the file
 * compile alone). */
#ifndef DH
#define DH 64 /* head width: each work-item keeps 2 DH / DS floats in registers */
#endif
#ifndef TK
#define TK 32 /* keys staged per tile: 2 TK DH floats of local memory */
#endif
#ifndef TQ
#define TQ 64 /* queries per work-group: the group's size (TQ DS work-items with DS > 1) */
#endif
#ifndef VW
#define VW 4 /* vector width of the loads: 4 when it divides DH, else 1 */
#endif
#ifndef CAUSAL
#define CAUSAL 0 /* 1: each query sees only the keys before it (see above) */
#endif
#ifndef QB
#define QB 1 /* queries per work-item: 1, or a vector width up to 16 for the CPU variant below */
#endif
#if VW == 4
typedef float4 vec;
#define LOADV(i, p) vload4((i), (p))
#define STOREV(x, i, p) vstore4((x), (i), (p))
#else
typedef float vec;
#define LOADV(i, p) ((p)[i])
#define STOREV(x, i, p) ((p)[i] = (x))
#endif
#define DV (DH / VW) /* vectors per row */

/* The arguments of both variants (see the launcher, host/ops/launch.c). */
#define ATTENTION_ARGS \
    global const float *q, ulong q_off, int q_ld, ulong q_bstride, \
    global const float *kk, ulong k_off, int k_ld, ulong k_bstride, \
    global const float *vv, ulong v_off, int v_ld, ulong v_bstride, \
    global float *o, ulong o_off, int o_ld, ulong o_bstride, \
    global const float *sk, ulong sk_off, int sk_ld, ulong sk_bstride, \
    global const float *sv, ulong sv_off, int sv_ld, ulong sv_bstride, \
    global const int *lengths, int n_rows, int key_count, int heads, \
    int kv_heads, float scale, int window

/* Both helpers are inlined by force: as calls they cost PoCL about 10% of the
 * kernel's time (its work-item loops keep less in registers). */
#define INLINE static inline __attribute__((always_inline))

#if QB == 1 /* ---- one query a work-item (or DS of them), key tiles staged in local memory ---- */

#ifndef DS
#define DS 1 /* work-items of one query, each holding DV / DS vectors of its row and sums */
#endif
#if DV % DS
#error "DS must divide the row's DH / VW vectors"
#endif
#define DVS (DV / DS) /* vectors of a query's row and sums that one work-item holds */
#define GROUP (TQ * DS) /* work-items of a group */

/* The loops over a work-item's DVS vectors, unrolled where its slice of the
 * query's row and sums (2 DH / DS floats) fits in registers: left rolled, GPU
 * compilers keep both arrays in scratch memory; unrolled past that, they
 * spill them instead (scripts/check-gpu-compilers.sh). */
#if DVS <= 16
#define ROW_UNROLL _Pragma("unroll")
#else
#define ROW_UNROLL
#endif

/* Stages rows [j0, j0 + tk) of keys and values in local memory; every
 * work-item of the group takes part. */
INLINE void stage(local vec (*kt)[DV], local vec (*vt)[DV], const global float *kb, int k_ld,
                  const global float *vb, int v_ld, int j0, int tk, int lid)
{
    for (int t = lid; t < tk * DV; t += GROUP) {
        const int j = t / DV, d = t % DV;
        kt[j][d] = LOADV(d, kb + (ulong)(j0 + j) * k_ld);
        vt[j][d] = LOADV(d, vb + (ulong)(j0 + j) * v_ld);
    }
}

/* A staged key times the work-item's slice of its query's row: vectors
 * slice, slice + DS, ... of both, key pointing at the key's vector slice
 * (the DS work-items of a query read neighbouring vectors of a key at once;
 * one pointer, so that the vectors are constant offsets from it). */
INLINE float partial(local const vec *key, const vec *qr)
{
    vec part = qr[0] * key[0];
    ROW_UNROLL
    for (int e = 1; e < DVS; e++) part += qr[e] * key[e * DS];
    return dot(part, (vec)1.0f);
}

/* Folds staged keys jmin..jmax-1 into one query's running max m, sum l and
 * the work-item's slice of its weighted values acc: an online softmax a key
 * at a time, which rescales the sums only when a key raises the max. No
 * array of a tile's scores: indexed at run time, GPU compilers put one in
 * scratch memory (scripts/check-gpu-compilers.sh). With DS > 1 a key's
 * score is the sum of the DS partials in ps, which each of the query's
 * work-items adds in the same order: the same m, l and corrections in all. */
INLINE void fold(local const vec (*kt)[DV], local const vec (*vt)[DV], local const float *ps, int jmin, int jmax,
                 const vec *qr, vec *acc, float *m, float *l, int lid)
{
    const int slice = lid % DS;
    for (int j = jmin; j < jmax; j++) {
#if DS > 1
        local const float *pj = ps + j * GROUP + (lid - slice);
        float s = pj[0];
        for (int t = 1; t < DS; t++) s += pj[t];
#else
        const float s = partial(kt[j] + slice, qr);
#endif
        if (s > *m) {
            const float corr = exp(*m - s); /* exp(-inf) = 0 at the first key */
            *l *= corr;
            ROW_UNROLL
            for (int e = 0; e < DVS; e++) acc[e] *= corr;
            *m = s;
        }
        const float p = exp(s - *m);
        *l += p;
        local const vec *value = vt[j] + slice;
        ROW_UNROLL
        for (int e = 0; e < DVS; e++) acc[e] += p * value[e * DS];
    }
}

/* One tile: stages rows [j0, j0 + tk) and folds those of them in [lo, hi)
 * into a live query's sums; with DS > 1 each work-item first writes its
 * partial scores of them into ps (ps[j GROUP + lid]). The whole group calls
 * it with the same j0 and tk (its barriers). */
INLINE void tile(local vec (*kt)[DV], local vec (*vt)[DV], local float *ps, const global float *kb, int k_ld,
                 const global float *vb, int v_ld, int j0, int tk, int lo, int hi, bool live, const vec *qr,
                 vec *acc, float *m, float *l, int lid)
{
    stage(kt, vt, kb, k_ld, vb, v_ld, j0, tk, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int jmin = max(lo - j0, 0), jmax = min(tk, hi - j0);
#if DS > 1
    if (live)
        for (int j = jmin; j < jmax; j++) ps[j * GROUP + lid] = partial(kt[j] + lid % DS, qr);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    if (live) fold(kt, vt, ps, jmin, jmax, qr, acc, m, l, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
}

kernel void attention_tiled(ATTENTION_ARGS)
{
    local vec kt[TK][DV];
    local vec vt[TK][DV];
#if DS > 1
    local float ps[TK * GROUP]; /* each work-item's partial scores of a tile's keys */
#else
    local float *ps = 0; /* none: a work-item holds its query's whole row */
#endif
    const int i = get_global_id(0) / DS, h = get_global_id(1), b = get_global_id(2); /* groups of GROUP */
    const int lid = get_local_id(0), slice = lid % DS;
    const int len = lengths[b];
    const int nk = key_count > 0 ? key_count : len;
    const int hk = h / (heads / kv_heads); /* the key/value head this query head reads */
    const bool live = i < len && i < n_rows;

    const global float *kb = kk + k_off + b * k_bstride + hk * DH;
    const global float *vb = vv + v_off + b * v_bstride + hk * DH;

    vec qr[DVS], acc[DVS]; /* vectors slice, slice + DS, ... of the query's row and sums */
    const global float *qrow = q + q_off + b * q_bstride + (ulong)min(i, n_rows - 1) * q_ld + h * DH;
    ROW_UNROLL
    for (int e = 0; e < DVS; e++) {
        qr[e] = live ? LOADV(e * DS + slice, qrow) * scale : (vec)0.0f;
        acc[e] = (vec)0.0f;
    }
    float m = -INFINITY, l = 0.0f;

    /* Rows past len still help load the tiles; the whole group must reach
     * every barrier, so every loop bound is the same for all of it. */
#if !CAUSAL
    for (int j0 = 0; j0 < (len > 0 ? nk : 0); j0 += TK) {
        const int tk = min(TK, nk - j0);
        tile(kt, vt, ps, kb, k_ld, vb, v_ld, j0, tk, 0, nk, live, qr, acc, &m, &l, lid);
    }
#else
    const int first = get_group_id(0) * TQ, last = min(first + TQ, len) - 1; /* the group's live rows */
    /* flash: keys 0..i; linformer: slots 0..i/w-1 */
    const int bound = last < first ? 0 : key_count > 0 ? last / window : last + 1;
    for (int j0 = 0; j0 < bound; j0 += TK) {
        const int tk = min(TK, bound - j0);
        tile(kt, vt, ps, kb, k_ld, vb, v_ld, j0, tk, 0, key_count > 0 ? i / window : i + 1, live, qr, acc, &m, &l,
             lid);
    }
    if (key_count > 0) { /* linformer: then the exact keys of its own window, up to itself */
        const global float *skb = sk + sk_off + b * sk_bstride + hk * DH;
        const global float *svb = sv + sv_off + b * sv_bstride + hk * DH;
        const int own = i / window * window;
        for (int j0 = first / window * window; j0 <= last; j0 += TK) {
            const int tk = min(TK, last + 1 - j0);
            tile(kt, vt, ps, skb, sk_ld, svb, sv_ld, j0, tk, own, i + 1, live, qr, acc, &m, &l, lid);
        }
    }
#endif
    if (i >= n_rows) return;
    global float *orow = o + o_off + b * o_bstride + (ulong)i * o_ld + h * DH;
    const float inv = (live && l > 0.0f) ? 1.0f / l : 0.0f;
    ROW_UNROLL
    for (int e = 0; e < DVS; e++) STOREV(acc[e] * inv, e * DS + slice, orow);
}

#else /* ---- QB > 1: the CPU variant, QB queries a work-item, one a lane ---- */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
typedef CAT(float, QB) qvec; /* one value of each of the work-item's queries */
typedef CAT(int, QB) qint;
#define LOADQ(p) CAT(vload, QB)(0, (p))
#define STOREQ(x, p) CAT(vstore, QB)((x), 0, (p))
EXP_NONPOS(qvec, CAT(as_float, QB), CAT(as_int, QB)) /* exp_nonpos.cl: every exp below is of a score minus a max */
/* Keys one pass over DH takes at once, each in its own register: the pass
 * holds QV KB query vectors of sums (scores) or of weights (accumulate), so
 * KB is sized to the device's vector registers (kernel_params.c). The loops
 * over them are unrolled by pragma: PoCL otherwise keeps them rolled, with one
 * accumulator that goes through memory at every step (2x slower). */
#ifndef KB
#define KB 8
#endif
constant int lane_index[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

#define LINE 16 /* floats in a 64-byte cache line */
#ifndef QV
#define QV 1 /* query vectors of one work-item: QV QB queries, each key and value element loaded once for all */
#endif
#define QW (QV * QB) /* queries of one work-item */
/* One d of the work-item's queries, as QV vectors (the loops' loads and
 * stores, whole aligned vectors) or QW floats (one query's element). */
typedef union {
    qvec v[QV];
    float f[QW];
} qrow;

/* s[v][j] = scores of vector v's queries (qt[d].v[v], already
 * scaled) against key rows j0 .. j0 + tk - 1. */
INLINE void scores(const qrow *qt, const global float *kb, int k_ld, int j0, int tk, qvec (*s)[TK])
{
    for (int jb = 0; jb < tk; jb += KB) {
        const global float *kr[KB];
        qvec acc[QV][KB];
        #pragma unroll
        for (int u = 0; u < KB; u++) {
            kr[u] = kb + (ulong)(j0 + min(jb + u, tk - 1)) * k_ld; /* past tk: a repeat, never kept */
            #pragma unroll
            for (int v = 0; v < QV; v++) acc[v][u] = (qvec)0.0f;
        }
        for (int d = 0; d < DH; d++) {
            qvec qd[QV];
            #pragma unroll
            for (int v = 0; v < QV; v++) qd[v] = qt[d].v[v];
            #pragma unroll
            for (int u = 0; u < KB; u++) {
                const qvec key = (qvec)kr[u][d];
                #pragma unroll
                for (int v = 0; v < QV; v++) acc[v][u] = fma(qd[v], key, acc[v][u]);
            }
        }
        for (int u = 0; u < KB && jb + u < tk; u++)
            #pragma unroll
            for (int v = 0; v < QV; v++) s[v][jb + u] = acc[v][u];
    }
}

/* ot = ot corr + sum_j p[j] v[j0 + j], over value rows j0 .. j0 + tk - 1,
 * for each query vector. Without CAUSAL every lane takes every row (rows
 * past a length are cleared at the end); with it a lane adds only its valid
 * rows, so that a NaN or inf in a value it must not see cannot reach it
 * through 0 * inf. */
INLINE void accumulate(qrow *ot, const qvec *corr, qvec (*p)[TK], qint (*valid)[TK], const global float *vb,
                       int v_ld, int j0, int tk)
{
    /* once here, not in each pass over DH below: a multiply there is an FMA's slot */
    for (int d = 0; d < DH; d++)
        #pragma unroll
        for (int v = 0; v < QV; v++) ot[d].v[v] *= corr[v];
    for (int jb = 0; jb < tk; jb += KB) {
        const global float *vr[KB];
        qvec pu[QV][KB];
#if CAUSAL
        qint ok[QV][KB];
#endif
        #pragma unroll
        for (int u = 0; u < KB; u++) {
            const int j = min(jb + u, tk - 1);
            vr[u] = vb + (ulong)(j0 + j) * v_ld;
            #pragma unroll
            for (int v = 0; v < QV; v++) {
                pu[v][u] = jb + u < tk ? p[v][j] : (qvec)0.0f; /* past tk: a repeated row, weighing 0 */
#if CAUSAL
                ok[v][u] = jb + u < tk ? valid[v][j] : (qint)0;
#endif
            }
        }
        for (int d = 0; d < DH; d++) {
            qvec acc[QV];
            #pragma unroll
            for (int v = 0; v < QV; v++) acc[v] = ot[d].v[v];
            #pragma unroll
            for (int u = 0; u < KB; u++) {
                const qvec value = (qvec)vr[u][d];
                #pragma unroll
                for (int v = 0; v < QV; v++) {
#if CAUSAL
                    acc[v] = select(acc[v], fma(pu[v][u], value, acc[v]), ok[v][u]);
#else
                    acc[v] = fma(pu[v][u], value, acc[v]);
#endif
                }
            }
            #pragma unroll
            for (int v = 0; v < QV; v++) ot[d].v[v] = acc[v];
        }
    }
}

/* qt[d].f[x] = scale q[i0 + x][d] for d = 0, step, 2 step, ... (0 for the
 * lanes past live). Row by row, each row read in order, in scalars: d by d
 * the loads became gathers (AVX-512: 12% of the kernel), and vectorised the
 * row order became scatters (bench/NOTES.md, items 23 and 49). */
INLINE void read_queries(qrow *qt, const global float *qbase, int q_ld, int i0, int n_rows, int live, float scale,
                         int step)
{
    for (int x = 0; x < QW; x++) {
        const global float *row = qbase + (ulong)min(i0 + x, n_rows - 1) * q_ld;
        #pragma clang loop vectorize(disable)
        for (int d = 0; d < DH; d += step) qt[d].f[x] = x < live ? row[d] * scale : 0.0f;
    }
}

/* r[i] lane x becomes r[x] lane i: the QB x QB block transposed in log2 QB
 * rounds; round h swaps the off-diagonal h x h blocks of each 2h x 2h one.
 * Gathering a row's floats from the QB vectors instead took 5% of the
 * kernel (bench/NOTES.md, item 53). */
INLINE void transpose(qvec *r)
{
    const qint lane = CAT(vload, QB)(0, lane_index);
    #pragma unroll
    for (int h = QB / 2; h > 0; h /= 2) {
        const qint upper = (lane & h) != 0; /* lanes whose index has bit h */
        const CAT(uint, QB) first = CAT(as_uint, QB)(select(lane, lane + QB - h, upper));
        const CAT(uint, QB) second = CAT(as_uint, QB)(select(lane + h, lane + QB, upper));
        #pragma unroll
        for (int i = 0; i < QB; i++)
            if (!(i & h)) {
                const qvec a = r[i], c = r[i + h];
                r[i] = shuffle2(a, c, first);
                r[i + h] = shuffle2(a, c, second);
            }
    }
}

/* Folds keys j_begin .. j_end - 1 into each lane's running max m, sum l and
 * weighted values ot (an online softmax); with CAUSAL, lane x of vector v
 * takes key j only when lo[v][x] <= j < hi[v][x]. */
INLINE void sweep(const qrow *qt, qrow *ot, qvec *m, qvec *l, const global float *kb, int k_ld,
                  const global float *vb, int v_ld, int j_begin, int j_end, const qint *lo, const qint *hi)
{
    for (int j0 = j_begin; j0 < j_end; j0 += TK) {
        const int tk = min(TK, j_end - j0);
        qvec s[QV][TK], corr[QV];
        qint valid[QV][TK]; /* causal only: which lanes take key j0 + j */
        scores(qt, kb, k_ld, j0, tk, s);
        #pragma unroll
        for (int v = 0; v < QV; v++) {
            qvec tile_max = (qvec)(-INFINITY);
            for (int j = 0; j < tk; j++) {
#if CAUSAL
                valid[v][j] = ((qint)(j0 + j) >= lo[v]) & ((qint)(j0 + j) < hi[v]);
                s[v][j] = select((qvec)(-INFINITY), s[v][j], valid[v][j]);
#endif
                tile_max = select(tile_max, s[v][j], s[v][j] > tile_max); /* fmax, without its NaN tests: tile_max is never NaN */
            }
            const qvec m_new = fmax(m[v], tile_max);
            /* a lane with no key yet keeps m = -inf: subtract 0 there (exp(-inf - -inf) is NaN) */
            const qvec base = select(m_new, (qvec)0.0f, m_new == (qvec)(-INFINITY));
            corr[v] = exp_nonpos(m[v] - base);
            l[v] *= corr[v];
            for (int j = 0; j < tk; j++) {
                s[v][j] = exp_nonpos(s[v][j] - base);
                l[v] += s[v][j];
            }
            m[v] = m_new;
        }
        accumulate(ot, corr, s, valid, vb, v_ld, j0, tk);
    }
}

kernel void attention_tiled(ATTENTION_ARGS)
{
    const int i0 = get_global_id(0) * QW, h = get_global_id(1), b = get_global_id(2);
    if (i0 >= n_rows) return;
    const int len = lengths[b];
    const int nk = key_count > 0 ? key_count : len;
    const int hk = h / (heads / kv_heads);
    const int live = clamp(min(len, n_rows) - i0, 0, QW); /* lanes 0 .. live - 1 are rows to attend */
    const global float *kb = kk + k_off + b * k_bstride + hk * DH;
    const global float *vb = vv + v_off + b * v_bstride + hk * DH;

    qrow qt[DH], ot[DH]; /* [d][query]: a query's row is a column */
    /* Every LINE-th float of each row first, then all of them: the QW rows
     * come from memory, and so the lines of all of them are requested at
     * once, not those of one row after another's (bench/NOTES.md, item 51).
     * The second pass overwrites what the first stored: the first is there
     * for its early loads, and a compiler that dropped it would cost speed,
     * not correctness. */
    const global float *qbase = q + q_off + b * q_bstride + h * DH;
    read_queries(qt, qbase, q_ld, i0, n_rows, live, scale, LINE);
    read_queries(qt, qbase, q_ld, i0, n_rows, live, scale, 1);
    for (int d = 0; d < DH; d++)
        #pragma unroll
        for (int v = 0; v < QV; v++) ot[d].v[v] = (qvec)0.0f;
    qvec m[QV], l[QV];
    qint lo[QV], hi[QV];
    #pragma unroll
    for (int v = 0; v < QV; v++) m[v] = (qvec)(-INFINITY), l[v] = (qvec)0.0f;
#if !CAUSAL
    #pragma unroll
    for (int v = 0; v < QV; v++) lo[v] = (qint)0, hi[v] = (qint)nk;
    sweep(qt, ot, m, l, kb, k_ld, vb, v_ld, 0, live > 0 ? nk : 0, lo, hi);
#else
    qint rows[QV], upto[QV];
    #pragma unroll
    for (int v = 0; v < QV; v++) {
        rows[v] = i0 + v * QB + CAT(vload, QB)(0, lane_index); /* each lane's query */
        upto[v] = select((qint)0, rows[v] + 1, rows[v] < (qint)len); /* rows at or past len see nothing */
    }
    const int last = i0 + live - 1; /* the last row to attend */
    if (key_count > 0) { /* linformer: the slots j < i / w, then its own window's keys up to itself */
        #pragma unroll
        for (int v = 0; v < QV; v++) lo[v] = (qint)0, hi[v] = select((qint)0, rows[v] / window, rows[v] < (qint)len);
        sweep(qt, ot, m, l, kb, k_ld, vb, v_ld, 0, live > 0 ? last / window : 0, lo, hi);
        const global float *skb = sk + sk_off + b * sk_bstride + hk * DH;
        const global float *svb = sv + sv_off + b * sv_bstride + hk * DH;
        #pragma unroll
        for (int v = 0; v < QV; v++) lo[v] = rows[v] / window * window;
        sweep(qt, ot, m, l, skb, sk_ld, svb, sv_ld, i0 / window * window, live > 0 ? last + 1 : 0, lo, upto);
    } else { /* flash: keys 0 .. i */
        #pragma unroll
        for (int v = 0; v < QV; v++) lo[v] = (qint)0;
        sweep(qt, ot, m, l, kb, k_ld, vb, v_ld, 0, live > 0 ? last + 1 : 0, lo, upto);
    }
#endif
    /* The rows are ot / l, scaled as they are read for the stores; 0 in the
     * lanes past live (they summed junk). */
    qrow inv;
    qint alive[QV];
    #pragma unroll
    for (int v = 0; v < QV; v++) {
        alive[v] = (qint)(v * QB) + CAT(vload, QB)(0, lane_index) < (qint)live;
        inv.v[v] = select((qvec)0.0f, 1.0f / l[v], l[v] > 0.0f);
    }
    global float *orow = o + o_off + b * o_bstride + (ulong)i0 * o_ld + h * DH;
    #pragma unroll
    for (int v = 0; v < QV; v++)
        for (int d0 = 0; d0 + QB <= DH; d0 += QB) {
            qvec block[QB];
            #pragma unroll
            for (int i = 0; i < QB; i++) block[i] = select((qvec)0.0f, ot[d0 + i].v[v] * inv.v[v], alive[v]);
            transpose(block);
            #pragma unroll
            for (int x = 0; x < QB; x++)
                if (i0 + v * QB + x < n_rows) STOREQ(block[x], orow + (ulong)(v * QB + x) * o_ld + d0);
        }
    for (int x = 0; x < QW && i0 + x < n_rows; x++) /* the last DH % QB floats of each row */
        for (int d = DH / QB * QB; d < DH; d++) orow[(ulong)x * o_ld + d] = x < live ? ot[d].f[x] * inv.f[x] : 0.0f;
}
#endif
