/* A program outside the tree, built against the installed library: it runs a
 * small layer on the default device and prints the library's version. */
#include <linformer.h>
#include <stdio.h>

int main(void)
{
    char msg[1024];
    lf_context *ctx = NULL;
    lf_status st = lf_context_create(NULL, &ctx, msg, sizeof msg);
    if (st != LF_OK) {
        fprintf(stderr, "%s: %s\n", lf_status_string(st), msg);
        return 1;
    }
    lf_attention_config cfg;
    lf_attention_config_init(&cfg, 16, 2, 32, 4);
    lf_attention *layer = NULL;
    float x[2 * 16], y[2 * 16];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 7) / 7.0f - 0.5f;
    if ((st = lf_attention_create(ctx, &cfg, NULL, &layer)) == LF_OK &&
        (st = lf_attention_init_random(layer, 7)) == LF_OK)
        st = lf_attention_forward(layer, x, y, 1, 2, NULL);
    if (st != LF_OK) fprintf(stderr, "%s: %s\n", lf_status_string(st), lf_context_last_error(ctx));
    else printf("linformer %s: y[0] = %g\n", lf_version_string(), y[0]);
    lf_attention_free(layer);
    lf_context_free(ctx);
    return st == LF_OK ? 0 : 1;
}
