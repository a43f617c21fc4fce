/* corrald's command line: the input is split at NUL bytes into argv
 * (argv[0] is the program), parsed over the defaults and checked; the
 * same words then go through cr_config_set in key/value pairs, as the
 * control socket's `set` does, and through the value parsers. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define CHECK(x) ((x) ? (void)0 : abort())
#define MAX_ARGS 64

static int split(char *text, size_t size, char **argv)
{
    int argc = 0;
    argv[argc++] = "corrald";
    for (size_t i = 0; i < size && argc < MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 1];
    int argc = split(text, size, argv);

    struct cr_config cfg;
    cr_config_init(&cfg);
    char err[256] = "", action = 0;
    (void)cr_config_find_file(argc, argv);
    int r = cr_config_parse_args(&cfg, argc, argv, &action, err, sizeof(err));
    CHECK(r == 0 || (r == 1 && (action == 'h' || action == 'v')) || (r < 0 && err[0]));
    if (r == 0) {
        err[0] = '\0';
        r = cr_config_finish(&cfg, err, sizeof(err));
        CHECK(r == 0 || (r < 0 && err[0]));
    }
    cr_config_done(&cfg);

    /* The words as `set key value`, live keys only and all keys. */
    cr_config_init(&cfg);
    for (int i = 1; i + 1 < argc; i += 2) {
        err[0] = '\0';
        r = cr_config_set(&cfg, argv[i], argv[i + 1], i % 4 == 1, err, sizeof(err));
        CHECK(r == 0 || (r < 0 && err[0]));
    }
    cr_config_done(&cfg);

    for (int i = 1; i < argc; i++) {
        uint64_t v;
        (void)cr_parse_size(argv[i], &v);
        (void)cr_parse_duration_ms(argv[i], &v);
        (void)cr_parse_uint(argv[i], UINT32_MAX, &v);
    }
    free(text);
    return 0;
}
