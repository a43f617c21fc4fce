/* cr_config_file: the configuration's way in from the host — the JSON file
 * named by --config (parsed by the pure config.h), and the checks of what
 * the options name on the file system. Errors come back as -errno with one
 * line naming the option in err; nothing is logged (the log is not open
 * yet). */
#pragma once

#include <stddef.h>

struct cr_config;

/* Reads path (at most 1 MiB) and applies it (cr_config_parse_json). */
int cr_config_file_load(struct cr_config *cfg, const char *path, char *err, size_t errlen);
/* The directory of --control must exist and be a directory. */
int cr_config_file_check_control(const struct cr_config *cfg, char *err, size_t errlen);
