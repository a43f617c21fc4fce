/* The plain driver: runs a harness over every file of its seed corpus
 * (the normal gcc build has no libFuzzer). Arguments are files or
 * directories; directories are read in name order so a failure names the
 * same input every run. Exits non-zero when nothing was run: a fuzz test
 * over an empty corpus would prove nothing. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define DRIVER_MAX_INPUT (1u << 20)

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz-driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(DRIVER_MAX_INPUT);
    size_t n = buf ? fread(buf, 1, DRIVER_MAX_INPUT, f) : 0;
    int bad = !buf || ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "fuzz-driver: %s: unreadable or over %u bytes\n", path, DRIVER_MAX_INPUT);
        free(buf);
        return -1;
    }
    /* An exact-size copy, so ASan sees a read past the input's end. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int run_path(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        fprintf(stderr, "fuzz-driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (run_file(path) < 0)
            return -1;
        ++*count;
        return 0;
    }
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, by_name);
    if (n < 0) {
        fprintf(stderr, "fuzz-driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int r = 0;
    for (int i = 0; i < n; i++) {
        char sub[4096];
        if (ents[i]->d_name[0] != '.' && r == 0) {
            snprintf(sub, sizeof(sub), "%s/%s", path, ents[i]->d_name);
            r = run_path(sub, count);
        }
        free(ents[i]);
    }
    free(ents);
    return r;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    unsigned count = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue; /* libFuzzer flags: meaningless here */
        if (run_path(argv[i], &count) < 0)
            return 1;
    }
    printf("%s: %u input(s) ran clean\n", argc ? argv[0] : "fuzz", count);
    return count ? 0 : 1;
}
