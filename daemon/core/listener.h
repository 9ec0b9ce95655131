/* SPDX-License-Identifier: MIT */
/*
 * The listening UNIX sockets: the ones systemd passes (socket activation)
 * or the ones we bind, with their mode and group, stale-socket removal,
 * the uid/gid allow-lists, and accept() that survives fd exhaustion.
 *
 * Every function here returns 0 or a negative errno. The socket setup
 * (perms, bind, stale files) and listener_new() log nothing: they say
 * what failed (in a string, or the errno) to their caller, who logs it
 * once at the level the failure has for it (the main socket is fatal, the
 * control socket and a VM's are not); the rest (socket activation, the
 * accept loop) logs its own failures once.
 */
#ifndef RDMACM_MUX_LISTENER_H
#define RDMACM_MUX_LISTENER_H

#include <glib.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/* Mode, owner and group of a socket file; (uid_t)-1 and (gid_t)-1 stand
 * for the daemon's own (its effective uid and gid). */
typedef struct ListenerPerms {
	mode_t mode;
	uid_t uid;
	gid_t gid;
	const char *group; /* as given, for log lines */
} ListenerPerms;

/* Who may connect: a uid list and a primary-gid list; NULL or empty
 * allows everyone. */
typedef struct ListenerAllow {
	const GArray *uids; /* of guint */
	const GArray *gids;
} ListenerAllow;

/**
 * listener_perms_parse() - read a --mode (octal) and a --group (name or
 * number; NULL or empty: keep the default group).
 * @what: the option's name for the message, e.g. "--mode"
 * @why: on failure, what failed (for the caller to free), unless NULL
 */
int listener_perms_parse(const char *mode, const char *group, mode_t default_mode,
			 const char *what, ListenerPerms *ret, char **why);

/**
 * listener_remove_stale_socket() - remove a socket file that no process
 * serves (logged at info). A live socket (-EADDRINUSE) and a file that is
 * not a socket (-EEXIST) stay.
 * @why: as for listener_perms_parse()
 */
int listener_remove_stale_socket(const char *path, char **why);

/**
 * listener_set_perms() - give the socket file at @path @perms, through a
 * file descriptor of the file itself (O_PATH, never following a symbolic
 * link): a symlink, FIFO or anything else put at @path is refused
 * (-EEXIST) and left alone. At no step does the file let in anyone but
 * the daemon and whom its old or its new permissions let in.
 * @why: as for listener_perms_parse()
 */
int listener_set_perms(const char *path, const ListenerPerms *perms, char **why);

/**
 * listener_bind() - replace a stale socket at @path, bind, apply @perms
 * (listener_set_perms()) and listen. The file is made with the owner's
 * bits alone, so the socket never exists with wider permissions than
 * asked. Sets *@bound once the file exists, so that the caller removes it
 * even when a later step fails.
 * @why: as for listener_perms_parse()
 */
int listener_bind(const char *path, const ListenerPerms *perms, int *ret_fd, bool *bound,
		  char **why);

/* Whether a passed fd of this name is not a listening socket but
 * something to set aside for the caller (fds kept in the fd store). */
typedef bool (*ListenerAsideFn)(const char *name);

/**
 * listener_take_activated() - take the fds systemd passed: the main socket
 * (named "main", or any other name) and optionally one named "control".
 * Each is checked to be a listening UNIX stream socket and made
 * non-blocking. Fds whose name @aside accepts go to @aside_fds (name ->
 * fd) instead, unchecked. *@ret_main and *@ret_control are -1 for a socket
 * not passed.
 * Return: the number of sockets taken (0 without socket activation), or a
 * negative errno (two main sockets, only a control socket, a socket of the
 * wrong kind, more than two).
 */
int listener_take_activated(ListenerAsideFn aside, GHashTable *aside_fds, int *ret_main,
			    int *ret_control);
/**
 * listener_take_passed() - listener_take_activated() of the @n fds @fds
 * named @names (NULL: all unnamed), passed some other way than socket
 * activation's environment (a test's); each is taken over.
 */
int listener_take_passed(unsigned n, const int *fds, const char *const *names,
			 ListenerAsideFn aside, GHashTable *aside_fds, int *ret_main,
			 int *ret_control);

/**
 * listener_allows() - whether @cred passes @allow.
 */
bool listener_allows(const ListenerAllow *allow, const struct ucred *cred);

/* Called for each accepted connection that passed the allow-lists; it
 * takes the fd over. */
typedef void (*ListenerAcceptFn)(int fd, const struct ucred *cred, void *userdata);

typedef struct Listener Listener;

/**
 * listener_new() - accept on @fd (not taken over) in @event's loop. A
 * connection from outside @allow is closed with a log line. When the
 * process or the system runs out of fds, accepting pauses (one log line)
 * and is retried every @retry_ms until it works, instead of spinning on a
 * socket that stays readable.
 * @what: the socket's name in log lines, e.g. "main" or "control"
 * Return: 0, or a negative errno when the loop cannot watch @fd; not
 * logged: the caller knows what the socket is for (the main socket's
 * failure is fatal, the control socket's is not).
 */
int listener_new(sd_event *event, int fd, const char *what, const ListenerAllow *allow,
		 unsigned retry_ms, ListenerAcceptFn fn, void *userdata, Listener **ret);

/**
 * listener_paused() - whether accepting is paused for want of fds.
 */
bool listener_paused(const Listener *l);

void listener_free(Listener *l);

#endif
