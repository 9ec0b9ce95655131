/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the sender processes (sender-pool.h) behind a UmadSender:
 * real processes forked from the test, on a port whose operations are the
 * test's (what a write does is chosen by the MAD's first byte), on a real
 * sd-event loop. Each test runs the loop until what it waits for is seen.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "sender-pool.h"
#include "umad-sender.h"
#include "unit-test.h"
#include "util.h"

/* What a sender's write does, by the MAD's first byte. */
enum { WRITE_OK, WRITE_STALL, WRITE_FAIL, WRITE_DIE };

/* Read by each sender as it was when it was forked. */
static int open_fails;

static int test_open_send_fd(const UmadPort *p, UmadSendFd *ret)
{
	(void)p;
	ret->agent_id = 0;
	return open_fails ? -ENODEV : 0;
}

static int test_send_on(const UmadSendFd *s, UmadBuffer *buf, size_t len)
{
	(void)s;
	(void)len;
	switch (buf->mad[0]) {
	case WRITE_STALL:
		sleep(30); /* the simulator's stall, in a test's terms */
		return 0;
	case WRITE_FAIL:
		return -ENODATA;
	case WRITE_DIE:
		_exit(3);
	default:
		return 0;
	}
}

static int test_send(UmadPort *p, UmadBuffer *buf, size_t len)
{
	(void)p;
	(void)buf;
	(void)len;
	return 0;
}

static int test_recv(UmadPort *p, UmadBuffer *buf, size_t *len)
{
	(void)p;
	(void)buf;
	(void)len;
	return -EAGAIN;
}

static void test_close_send_fd(UmadSendFd *s)
{
	(void)s;
}

static void test_release(UmadPort *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

static const UmadPortOps test_port_ops = UMAD_PORT_OPS(test);

typedef struct Fixture {
	char *sysfs;
	sd_event *event;
	UmadPort *port;
	UmadSender *sender;
	UmadSendJob jobs[8];
	int results[8];
	unsigned done;
	int saved_stderr;
	char *log_path;
} Fixture;

static void on_done(void *userdata, UmadSendJob *job)
{
	Fixture *f = userdata;

	f->results[job - f->jobs] = job->result;
	f->done++;
}

static void start(Fixture *f, unsigned senders, uint64_t deadline_usec)
{
	UmadSenderConfig cfg = {
		.senders = senders,
		.fast_usec = 1000000,
		.fail_usec = 1000000,
		.deadline_usec = deadline_usec,
		.max_queued = 8,
		.workers = &sender_pool_ops,
	};

	g_assert_cmpint(umad_sender_new(f->event, f->port, &cfg, on_done, f, &f->sender), ==, 0);
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
	const char *const gids[] = { UNIT_TEST_GID_LINK_LOCAL, NULL };
	int fd;
	(void)data;

	memset(f, 0, sizeof(*f));
	open_fails = 0;
	f->sysfs = unit_test_fake_sysfs("sender-pool-XXXXXX", "test0", gids);
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g_assert_cmpint(umad_port_new("test0", 1, true, fd, &test_port_ops, NULL, NULL, &f->port), ==,
			0);
	g_assert_cmpint(sd_event_new(&f->event), >=, 0);
	/* The pool logs to stderr: kept in a file, to count its lines. */
	f->log_path = g_build_filename(f->sysfs, "log", NULL);
	fflush(stderr);
	f->saved_stderr = dup(STDERR_FILENO);
	fd = open(f->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	g_assert_cmpint(fd, >=, 0);
	g_assert_cmpint(dup2(fd, STDERR_FILENO), ==, STDERR_FILENO);
	close(fd);
	log_setup(LOG_INFO, true);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
	(void)data;

	umad_sender_free(f->sender);
	umad_port_close(f->port);
	sd_event_unref(f->event);
	fflush(stderr);
	(void)dup2(f->saved_stderr, STDERR_FILENO);
	close(f->saved_stderr);
	unit_test_remove_tree(f->sysfs);
	g_free(f->log_path);
}

static UmadSenderStats stats(Fixture *f)
{
	UmadSenderStats st;

	umad_sender_stats(f->sender, &st);
	return st;
}

/* Run the loop until @cond holds; a minute is a hang. */
#define RUN_UNTIL(f, cond)                                                             \
	do {                                                                           \
		gint64 end_ = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;            \
		while (!(cond)) {                                                      \
			g_assert_cmpint(g_get_monotonic_time(), <, end_);              \
			g_assert_cmpint(sd_event_run((f)->event, 100000), >=, 0);     \
		}                                                                      \
	} while (0)

/* start(), then run the loop until all @senders are live. */
static void start_live(Fixture *f, unsigned senders, uint64_t deadline_usec)
{
	start(f, senders, deadline_usec);
	RUN_UNTIL(f, stats(f).live == senders);
}

/* Job @i does @what, to destination host @host. */
static void queue(Fixture *f, unsigned i, int what, unsigned host)
{
	UmadSendJob *j = &f->jobs[i];

	memset(j, 0, sizeof(*j));
	j->len = 256;
	j->buf.hdr.addr.grh_present = 1;
	j->buf.hdr.addr.gid[15] = (uint8_t)host;
	j->buf.mad[0] = (uint8_t)what;
	f->results[i] = 1;
	g_assert_cmpint(umad_sender_queue(f->sender, j), ==, 0);
}

static unsigned count_lines(Fixture *f, const char *needle)
{
	g_autofree char *text = NULL;
	unsigned n = 0;

	fflush(stderr);
	g_assert_true(g_file_get_contents(f->log_path, &text, NULL, NULL));
	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Senders start on the loop; a write goes through and is answered. */
UNIT_FIXTURE_TEST("/sender-pool/write", NULL, fixture_setup, test_write)
{
	(void)data;

	start_live(f, 2, 5000000);
	g_assert_cmpuint(stats(f).wanted, ==, 2);
	queue(f, 0, WRITE_OK, 1);
	queue(f, 1, WRITE_FAIL, 2);
	RUN_UNTIL(f, f->done == 2);
	g_assert_cmpint(f->results[0], ==, 0);
	g_assert_cmpint(f->results[1], ==, -ENODATA);
	g_assert_cmpuint(stats(f).written, ==, 2);
	g_assert_cmpuint(umad_sender_pending(f->sender), ==, 0);
}

/*
 * A write stuck past the deadline: its sender is killed and replaced, the
 * MAD answers ETIMEDOUT (long before the 30 s it would take), and the
 * other sender kept working meanwhile.
 */
UNIT_FIXTURE_TEST("/sender-pool/deadline", NULL, fixture_setup, test_deadline)
{
	(void)data;

	start_live(f, 2, 300000);
	queue(f, 0, WRITE_STALL, 1);
	queue(f, 1, WRITE_OK, 2);
	RUN_UNTIL(f, f->done == 2);
	g_assert_cmpint(f->results[1], ==, 0);
	g_assert_cmpint(f->results[0], ==, -ETIMEDOUT);
	g_assert_cmpuint(stats(f).timeouts, ==, 1);
	g_assert_cmpuint(count_lines(f, "did not finish in 300 ms"), ==, 1);
	RUN_UNTIL(f, stats(f).live == 2);
	queue(f, 2, WRITE_OK, 3);
	RUN_UNTIL(f, f->done == 3);
	g_assert_cmpint(f->results[2], ==, 0);
}

/* A sender that dies in the middle of a write: EIO, and a new one. */
UNIT_FIXTURE_TEST("/sender-pool/lost", NULL, fixture_setup, test_lost)
{
	(void)data;

	start_live(f, 1, 5000000);
	queue(f, 0, WRITE_DIE, 1);
	RUN_UNTIL(f, f->done == 1);
	g_assert_cmpint(f->results[0], ==, -EIO);
	g_assert_cmpuint(stats(f).lost, ==, 1);
	RUN_UNTIL(f, stats(f).live == 1);
	queue(f, 1, WRITE_OK, 2);
	RUN_UNTIL(f, f->done == 2);
	g_assert_cmpint(f->results[1], ==, 0);
}

/*
 * A stop waits the time it is given for a write in flight, not for the
 * write: the stalled one answers ETIMEDOUT, one queued behind it EAGAIN
 * (never sent), and the stop is over long before the stall would be.
 */
UNIT_FIXTURE_TEST("/sender-pool/bounded-stop", NULL, fixture_setup, test_bounded_stop)
{
	gint64 t0;
	(void)data;

	start_live(f, 1, 60000000);
	queue(f, 0, WRITE_STALL, 1);
	queue(f, 1, WRITE_OK, 2); /* waits for the one sender */
	t0 = g_get_monotonic_time();
	umad_sender_stop(f->sender, 200000);
	g_assert_cmpuint(f->done, ==, 2);
	g_assert_cmpint(f->results[0], ==, -ETIMEDOUT);
	g_assert_cmpint(f->results[1], ==, -EAGAIN);
	/* Not the 30 s of the stall (a generous bound: machines are noisy). */
	g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
	g_assert_cmpuint(count_lines(f, "did not finish within 200 ms of the stop"), ==, 1);
	/* Stopped: nothing more is taken. */
	g_assert_cmpint(umad_sender_queue(f->sender, &f->jobs[2]), ==, -EAGAIN);
	g_assert_cmpuint(stats(f).live, ==, 0);
}

/*
 * Senders that cannot start are logged once, not at every try; MADs
 * answer EAGAIN while none is live or starting; senders start again
 * (with backoff) once they can, and that is logged too.
 */
UNIT_FIXTURE_TEST("/sender-pool/cannot-start", NULL, fixture_setup, test_cannot_start)
{
	UmadSendJob j = { .len = 256 };
	(void)data;

	open_fails = 1;
	start(f, 2, 5000000);
	RUN_UNTIL(f, stats(f).start_failures >= 4);
	g_assert_cmpuint(stats(f).live, ==, 0);
	g_assert_cmpuint(count_lines(f, "a sender process cannot start"), ==, 1);
	/* Between tries no sender is on its way: a MAD is not taken. */
	RUN_UNTIL(f, stats(f).starting == 0);
	g_assert_cmpint(umad_sender_queue(f->sender, &j), ==, -EAGAIN);
	open_fails = 0;
	RUN_UNTIL(f, stats(f).live == 2);
	g_assert_cmpuint(count_lines(f, "sender processes start again"), ==, 1);
	queue(f, 0, WRITE_OK, 1);
	RUN_UNTIL(f, f->done == 1);
	g_assert_cmpint(f->results[0], ==, 0);
}

static int never(sd_event_source *s, uint64_t usec, void *userdata)
{
	(void)s;
	(void)usec;
	(void)userdata;
	return 0;
}

/*
 * No sender can even be forked while the pool starts (no fd is left for
 * its socket): the start reports it as any failed start, once, without
 * touching a pool it has not handed back yet, and the senders start once
 * fds are free again.
 */
UNIT_FIXTURE_TEST("/sender-pool/no-fd-at-start", NULL, fixture_setup, test_no_fd_at_start)
{
	sd_event_source *timer = NULL;
	struct rlimit saved, none;
	int lowest_free;
	(void)data;

	/* The loop's monotonic timer fd exists before the fds run out. */
	g_assert_cmpint(sd_event_add_time_relative(f->event, &timer, CLOCK_MONOTONIC, 3600000000,
						   0, never, NULL),
			>=, 0);
	lowest_free = dup(STDIN_FILENO);
	g_assert_cmpint(lowest_free, >=, 0);
	close(lowest_free);
	g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &saved), ==, 0);
	none = saved;
	none.rlim_cur = (rlim_t)lowest_free;
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &none), ==, 0);
	start(f, 2, 5000000);
	g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &saved), ==, 0);
	g_assert_cmpuint(stats(f).start_failures, ==, 1);
	g_assert_cmpuint(count_lines(f, "a sender process cannot start"), ==, 1);
	g_assert_cmpuint(count_lines(f, "Too many open files"), ==, 1);
	RUN_UNTIL(f, stats(f).live == 2);
	g_assert_cmpuint(count_lines(f, "sender processes start again"), ==, 1);
	queue(f, 0, WRITE_OK, 1);
	RUN_UNTIL(f, f->done == 1);
	g_assert_cmpint(f->results[0], ==, 0);
	sd_event_source_unref(timer);
}

UNIT_TEST_MAIN()
