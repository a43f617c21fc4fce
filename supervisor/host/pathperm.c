/* Path permissions for the workers' user (pathperm.h). */
#include "pathperm.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

bool cr_path_reachable(const char *path, uid_t uid, gid_t gid, char *bad, size_t size,
                       struct stat *bad_st)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return true; /* not ours to judge */
    for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        struct stat st;
        if (stat(dir, &st) == 0) {
            bool ok = uid == 0 || (st.st_uid == uid   ? (st.st_mode & S_IXUSR)
                                   : st.st_gid == gid ? (st.st_mode & S_IXGRP)
                                                      : (st.st_mode & S_IXOTH));
            if (!ok) {
                snprintf(bad, size, "%s", dir);
                *bad_st = st;
                return false;
            }
        }
        if (slash == dir)
            break;
    }
    return true;
}
