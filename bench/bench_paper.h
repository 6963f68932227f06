/* bench_paper.h - the Linformer paper's Table 3, for comparison with what we measure. */
#ifndef LF_BENCH_PAPER_H
#define LF_BENCH_PAPER_H

#include <stdbool.h>

/* The paper's inference-time speed-up and memory saving of Linformer over a
 * standard Transformer at (n, k); false where the paper has no figure. */
bool bench_paper_lookup(int n, int k, double *time_x, double *memory_x);

/* One line naming the source, for the table's legend and the JSON. */
extern const char bench_paper_source[];

#endif
