/* placeholder until the cgroups module lands */
#include "cr_cgroup.h"
