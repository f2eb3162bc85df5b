/*
 * pipeline: run an offhost pipeline from C and collect one of its host-out channels.
 *
 *   pipeline [--engine URL [--name NAME]] [--module NAME=FILE.wasm]... FILE.ion OUTPUT OUT_FILE
 *
 * Submits the pipeline in FILE.ion to the embedded engine (in this process) or, with
 * --engine, to an engine daemon (`offhost engine --listen URL`), there under NAME with
 * --name (which `offhost submit --status NAME` and other engines' calls then use), writes
 * every buffer of `host-out name=OUTPUT` to OUT_FILE, waits for the end and prints the
 * statistics as JSON. Each --module adds a WebAssembly module that the pipeline runs as
 * `wasm module=NAME` (sent to the daemon with --engine).
 * With OUTPUT `-` it runs the pipeline with offhost_run (host channels closed or discarded).
 *
 * Build: cc -I bindings/c/include examples/c/pipeline.c -L target/debug -loffhost_c -o pipeline
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offhost.h"

static void check(offhost_status s, const char *what) {
    if (s != OFFHOST_STATUS_OK) {
        fprintf(stderr, "pipeline: %s: %s: %s\n", what, offhost_status_name(s), offhost_last_error());
        exit(1);
    }
}

static char *read_file_len(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    size_t n;
    while (text && (n = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            text = realloc(text, cap);
        }
    }
    fclose(f);
    if (!text) {
        fprintf(stderr, "pipeline: out of memory\n");
        exit(1);
    }
    text[len] = 0;
    if (size) {
        *size = len;
    }
    return text;
}

static char *read_file(const char *path) {
    return read_file_len(path, NULL);
}

int main(int argc, char **argv) {
    const char *engine_url = NULL;
    const char *name = NULL;
    int a = 1;
    if (argc > 2 && strcmp(argv[1], "--engine") == 0) {
        engine_url = argv[2];
        a = 3;
        if (argc > 4 && strcmp(argv[3], "--name") == 0) {
            name = argv[4];
            a = 5;
        }
    }
    int first_module = a;
    while (argc - a > 3 && strcmp(argv[a], "--module") == 0) {
        a += 2;
    }
    if (argc - a != 3) {
        fprintf(stderr, "usage: pipeline [--engine URL [--name NAME]] [--module NAME=FILE.wasm]... FILE.ion OUTPUT OUT_FILE\n");
        return 2;
    }
    char *text = read_file(argv[a]);
    const char *output = argv[a + 1];
    char *stats = NULL;

    if (strcmp(output, "-") == 0) {
        check(offhost_run(text, &stats), "run");
        printf("%s\n", stats);
        offhost_string_free(stats);
        free(text);
        return 0;
    }

    offhost_engine *engine;
    if (engine_url) {
        check(offhost_engine_connect(engine_url, &engine), "connect to the engine");
    } else {
        check(offhost_engine_embedded(0, &engine), "embedded engine");
    }
    for (int m = first_module; m < a; m += 2) {
        char *spec = argv[m + 1];
        char *eq = strchr(spec, '=');
        if (!eq) {
            fprintf(stderr, "pipeline: --module %s: NAME=FILE.wasm\n", spec);
            return 2;
        }
        *eq = 0;
        size_t size;
        char *module = read_file_len(eq + 1, &size);
        check(offhost_engine_add_module(engine, spec, (const uint8_t *)module, size), eq + 1);
        free(module);
    }
    offhost_pipeline *p;
    if (name) {
        check(offhost_engine_submit_named(engine, text, name, &p), argv[a]);
    } else {
        check(offhost_engine_submit(engine, text, &p), argv[a]);
    }

    FILE *out = fopen(argv[a + 2], "wb");
    if (!out) {
        perror(argv[a + 2]);
        return 1;
    }
    size_t cap = 1024, len = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        offhost_status s = offhost_pipeline_recv(p, output, buf, cap, &len, -1);
        if (s == OFFHOST_STATUS_END) {
            break;
        }
        if (s == OFFHOST_STATUS_TOO_LARGE) {
            /* The buffer stays queued: grow ours and receive it again. */
            cap = len;
            buf = realloc(buf, cap);
            if (!buf) {
                fprintf(stderr, "pipeline: out of memory\n");
                return 1;
            }
            continue;
        }
        check(s, "receive");
        if (fwrite(buf, 1, len, out) != len) {
            perror(argv[a + 2]);
            return 1;
        }
    }
    fclose(out);
    check(offhost_pipeline_wait(p, -1, &stats), "wait");
    printf("%s\n", stats);
    offhost_string_free(stats);
    free(buf);
    offhost_pipeline_free(p);
    offhost_engine_free(engine);
    free(text);
    return 0;
}
