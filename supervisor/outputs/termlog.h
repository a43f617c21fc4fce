/* cr_termlog: the termination message (termsum.h) kept current in a file,
 * --termination-log PATH, by default Kubernetes' /dev/termination-log where
 * it exists. Rewritten at start-up, at every worker death and at the stop,
 * so that a container killed outright (its own OOM kill, SIGKILL after the
 * grace period) still leaves the last summary; the exit writes the last
 * word. An output: it subscribes to the core's events and reads its views.
 *
 * The file is rewritten in place (written over from offset 0, then cut to
 * length), never replaced: Kubernetes bind-mounts it, so a rename over it
 * would fail, and the old text stays readable until the new one is in. */
#pragma once

struct cr_supervisor;
struct cr_termlog;
struct cr_event;
struct cr_config;

/* corrald's exit codes. 0: stopped (SIGTERM, SIGINT or `stop`) and every
 * worker drained, SIGKILLed at the stop timeout included. A corrald killed
 * outright shows the signal's code instead (137: SIGKILL, as by the
 * kernel's OOM killer or after a grace period). */
#define CR_EXIT_STOPPED 0
#define CR_EXIT_STARTUP 1 /* start-up failed: the socket, the cgroups, the program, ... */
#define CR_EXIT_USAGE 2   /* the command line or the config file is wrong */

/* Opens the file the configuration names (or the default); *ret NULL when
 * there is none ("none", or no /dev/termination-log). Logs what it uses
 * and why it cannot; a file that cannot be opened is not fatal. */
void cr_termlog_open(const struct cr_supervisor *sup, struct cr_termlog **ret);
/* Subscriber: deaths, the stop. */
void cr_termlog_on_event(void *t, const struct cr_event *ev);
/* A configuration refused before anything started (exit CR_EXIT_USAGE):
 * one line to the file it names, or the default one. */
void cr_termlog_usage(const struct cr_config *cfg, const char *err);
/* The last word (corrald exits code, why), then closes and frees; NULL-safe. */
void cr_termlog_exit(struct cr_termlog *t, int code, const char *why);
