/* Whether the workers' user can reach a path corrald made for them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Whether uid/gid (no supplementary groups: a worker has none) may search
 * every directory above path; else false with the first that stops it in
 * bad (size bytes) and its stat in *bad_st. */
bool cr_path_reachable(const char *path, uid_t uid, gid_t gid, char *bad, size_t size,
                       struct stat *bad_st);
