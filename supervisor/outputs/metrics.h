/* Prometheus text exposition (version 0.0.4) of what `status` shows. */
#pragma once

struct cr_supervisor;

/* The whole exposition; caller frees. NULL when out of memory. */
char *cr_metrics_text(const struct cr_supervisor *sup);
