/*
 * bench_paper.c - Table 3 of Wang, Li, Khabsa, Fang, Ma, "Linformer: Self-Attention
 * with Linear Complexity", arXiv:2006.04768 (2020), section 5.3, copied from the
 * paper's text (ar5iv.labs.arxiv.org/html/2006.04768). Left half: inference time
 * saved; right half: memory saved (the ratio of the largest batch that fits),
 * Linformer with layerwise sharing against a standard Transformer, full forward
 * passes on a 16 GB Tesla V100. 0 = no figure (k >= n).
 */
#include "bench_paper.h"

#include <stddef.h>

const char bench_paper_source[] =
    "Wang et al. 2020, arXiv:2006.04768, Table 3 (V100, whole model, layerwise sharing)";

static const int paper_k[5] = {128, 256, 512, 1024, 2048};

static const struct {
    int n;
    double time[5], memory[5];
} paper[] = {
    {512, {1.5, 1.3, 0, 0, 0}, {1.7, 1.5, 0, 0, 0}},
    {1024, {1.7, 1.6, 1.3, 0, 0}, {3.0, 2.9, 1.8, 0, 0}},
    {2048, {2.6, 2.4, 2.1, 1.3, 0}, {6.1, 5.6, 3.6, 2.0, 0}},
    {4096, {3.4, 3.2, 2.8, 2.2, 1.3}, {14, 13, 8.3, 4.3, 2.3}},
    {8192, {5.5, 5.0, 4.4, 3.5, 2.1}, {28, 26, 17, 8.5, 4.5}},
    {16384, {8.6, 7.8, 7.0, 5.6, 3.3}, {56, 48, 32, 16, 8}},
    {32768, {13, 12, 11, 8.8, 5.0}, {56, 48, 36, 18, 16}},
    {65536, {20, 18, 16, 14, 7.9}, {60, 52, 40, 20, 18}},
};

bool bench_paper_lookup(int n, int k, double *time_x, double *memory_x)
{
    for (size_t r = 0; r < sizeof paper / sizeof paper[0]; r++) {
        if (paper[r].n != n) continue;
        for (int c = 0; c < 5; c++) {
            if (paper_k[c] != k || paper[r].time[c] == 0) continue;
            if (time_x) *time_x = paper[r].time[c];
            if (memory_x) *memory_x = paper[r].memory[c];
            return true;
        }
    }
    return false;
}
