/* SPDX-License-Identifier: MIT */
/*
 * Owns libumad-sim.so: the libibumad API implemented on the simulated fabric,
 * for LD_PRELOAD. Each umad_open_port() makes a FIFO in DIR/sock and returns
 * it, opened for reading and writing, as the "umad fd": the caller polls it
 * as usual, and hands it to other processes as the kernel's umad fds are
 * handed (fork, exec, SCM_RIGHTS, a service manager's fd store). The fd's
 * open file holds a shared flock for as long as any process holds a copy:
 * its agents live that long, and MADs for them wait in the FIFO meanwhile,
 * as in the kernel's queue. A process that uses a umad fd it did not open
 * takes it over: the agents registered on it come from the registry.
 * A send routes by GID or LID, looks up the receiving agent in DIR/agents
 * (cached until the shared generation changes) and writes the packet, already
 * in the form the receiver's read() would see, straight into its FIFO.
 */
#include <infiniband/umad.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "deferred.h"
#include "fabric.h"
#include "faults.h"

#define MAX_AGENTS 32 /* IB_UMAD_MAX_AGENTS */
#define ROUTE_CACHE 64
#define REORDER_WINDOW_MS 50
#define OPENIB_OUI 0x001405

G_STATIC_ASSERT(sizeof(struct ib_user_mad) == SIM_UMAD_HDR);
G_STATIC_ASSERT(sizeof(struct sim_pkt_hdr) == 16);
G_STATIC_ASSERT(SIM_PKT_SIZE <= PIPE_BUF);

struct agent {
	bool used;
	uint32_t serial;
	uint32_t hi_tid;
	uint8_t mclass;
	GPtrArray *paths; /* registry entries this agent owns */
};

struct simfd {
	int fd; /* the FIFO, handed out as the umad fd */
	char ca[SIM_CA_NAME_LEN];
	int port;
	uint32_t epoch;
	uint64_t owner;
	char fifo_name[128];
	char fifo_path[PATH_MAX];
	struct agent agents[MAX_AGENTS];
	/* The port's fault generator, shared by every fd of this process and
	 * of the children it forks after opening the port (a daemon's sender
	 * processes): the faults follow the order of the port's sends, however
	 * many fds and processes a program sends from (the soak replays them
	 * from the seed). */
	struct port_rng *rng;
	uint32_t stall_served; /* the last `stall` this fd slept for */
	/* ib_umad_write holds the file's mutex for the whole write, address
	 * resolution included: writes on one fd wait for each other. */
	pthread_mutex_t write_lock;
};

struct route {
	bool by_tid;
	bool found;
	char ca[SIM_CA_NAME_LEN];
	int port;
	uint8_t mclass, version, method;
	uint32_t oui, hi_tid;
	struct sim_reg reg;
	int wfd;
};

union pkt {
	uint8_t bytes[SIM_PKT_SIZE];
	struct {
		struct sim_pkt_hdr h;
		struct ib_user_mad u;
		uint8_t mad[SIM_MAD_SIZE];
	} s;
};

static struct {
	pthread_mutex_t lock;
	GHashTable *port_rngs; /* "CA/PORT" -> struct port_rng (shared mapping) */
	bool init_done;
	int init_rc;
	char *dir;
	struct sim_shared *sh;
	uint64_t gen;
	struct sim_fabric *fab;
	struct sim_faults faults;
	bool faults_from_env;
	bool new_abi;
	int debug;
	struct simfd **fds;
	int nfds;
	struct route routes[ROUTE_CACHE];
	unsigned nroutes, evict;
	uint64_t next_owner;
	unsigned fifo_seq;
	/* Tells this process image's FIFOs from those of the image before an
	 * exec() (same pid, same sequence). */
	uint32_t image;
	uint32_t next_serial;
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void warn(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

static void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("umad-sim: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void flush_routes(void)
{
	for (unsigned i = 0; i < S.nroutes; i++)
		if (S.routes[i].wfd >= 0)
			close(S.routes[i].wfd);
	S.nroutes = 0;
	S.evict = 0;
}

/* Reloads the fabric when any process changed config or registry. */
static int refresh_locked(void)
{
	uint64_t g = __atomic_load_n(&S.sh->generation, __ATOMIC_ACQUIRE);
	struct sim_fabric *f = NULL;
	g_autoptr(GError) err = NULL;
	int rc;

	if (S.fab && g == S.gen)
		return 0;
	rc = sim_fabric_load(S.dir, &f, &err);
	if (rc < 0) {
		if (!S.fab)
			warn("cannot load fabric %s: %s", S.dir, err ? err->message : "?");
		return S.fab ? 0 : rc;
	}
	sim_fabric_free(S.fab);
	S.fab = f;
	S.gen = g;
	flush_routes();
	if (!S.faults_from_env && sim_faults_parse(f->faults, &S.faults, NULL) < 0)
		memset(&S.faults, 0, sizeof(S.faults));
	return 0;
}

static void after_fork_child(void)
{
	/* The parent's fds and registrations are not the child's to use or undo. */
	pthread_mutex_init(&S.lock, NULL);
	S.fds = NULL;
	S.nfds = 0;
}

static int init_locked(void)
{
	const char *dir, *spec;
	g_autoptr(GError) err = NULL;
	int rc;

	if (S.init_done)
		return S.init_rc;
	S.init_done = true;
	S.init_rc = -ENODEV;
	S.debug = getenv("UMAD_SIM_DEBUG") ? 1 : 0;
	dir = getenv("UMAD_SIM_FABRIC");
	if (!dir || !*dir) {
		warn("UMAD_SIM_FABRIC is not set: no simulated devices");
		return S.init_rc;
	}
	S.dir = g_canonicalize_filename(dir, NULL);
	rc = sim_shared_map(S.dir, &S.sh);
	if (rc < 0) {
		warn("cannot map %s/state: %s", S.dir, g_strerror(-rc));
		return S.init_rc = rc;
	}
	spec = getenv("UMAD_SIM_FAULTS");
	if (spec) {
		S.faults_from_env = true;
		if (sim_faults_parse(spec, &S.faults, &err) < 0) {
			warn("UMAD_SIM_FAULTS ignored: %s", err->message);
			memset(&S.faults, 0, sizeof(S.faults));
		}
	}
	pthread_atfork(NULL, NULL, after_fork_child);
	/* Serials tell an agent's packets from those of an agent before it in
	 * the same slot of the same fd, which may have been another
	 * process's: they must not start over in each process. */
	S.next_serial = g_random_int() & 0x7fff0000u;
	rc = refresh_locked();
	if (rc < 0)
		return S.init_rc = rc;
	return S.init_rc = 0;
}

/* Takes the lock and makes sure the fabric is loaded and current. */
static int enter(void)
{
	int rc;

	pthread_mutex_lock(&S.lock);
	rc = init_locked();
	if (rc == 0)
		rc = refresh_locked();
	return rc;
}

static void leave(void)
{
	pthread_mutex_unlock(&S.lock);
}

static struct simfd *adopt_locked(int fd);

/* The fd's state; a umad fd this process did not open (inherited, passed
 * over a socket) is taken over on its first use. */
static struct simfd *get_fd(int fd)
{
	struct simfd *s = fd >= 0 && fd < S.nfds ? S.fds[fd] : NULL;

	if (!s && fd >= 0 && S.init_done && S.init_rc == 0 && S.fab)
		s = adopt_locked(fd);
	return s;
}

static bool fd_dead(const struct simfd *s)
{
	const struct sim_port *p = sim_fabric_find_port(S.fab, s->ca, s->port);

	return !p || !p->present || p->epoch != s->epoch;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Picks a CA like libibumad: the first (by name) with a usable port. */
static const struct sim_ca *resolve_ca(const char *name)
{
	const struct sim_ca *best = NULL;

	if (name)
		return sim_fabric_find_ca(S.fab, name);
	for (unsigned i = 0; i < S.fab->nca; i++) {
		const struct sim_ca *ca = &S.fab->cas[i];
		bool up = false;

		for (unsigned p = 0; p < ca->nports; p++)
			up |= ca->ports[p].present;
		if (up && (!best || strcmp(ca->name, best->name) < 0))
			best = ca;
	}
	return best;
}

/* Port 0 means "any": an active InfiniBand port first, then any active port. */
static const struct sim_port *resolve_port(const struct sim_ca *ca, int num)
{
	if (num > 0)
		return (unsigned)num <= ca->nports ? &ca->ports[num - 1] : NULL;
	for (int pass = 0; pass < 2; pass++)
		for (unsigned p = 0; p < ca->nports; p++)
			if (ca->ports[p].present && (pass || ca->ports[p].link == SIM_LINK_IB))
				return &ca->ports[p];
	return ca->nports ? &ca->ports[0] : NULL;
}

/* ---- discovery ---------------------------------------------------------- */

int umad_init(void)
{
	return 0;
}

int umad_done(void)
{
	return 0;
}

int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max)
{
	g_autofree const char **names = NULL;
	int n = 0;

	if (enter() < 0) {
		leave();
		return 0;
	}
	names = g_new0(const char *, S.fab->nca + 1);
	for (unsigned i = 0; i < S.fab->nca; i++)
		names[i] = S.fab->cas[i].name;
	qsort(names, S.fab->nca, sizeof(*names), cmp_names);
	for (unsigned i = 0; i < S.fab->nca && n < max; i++)
		g_strlcpy(cas[n++], names[i], UMAD_CA_NAME_LEN);
	leave();
	return n;
}

static void fill_port(const struct sim_port *p, umad_port_t *port)
{
	const uint8_t *g0 = p->gids[0].gid;

	memset(port, 0, sizeof(*port));
	g_strlcpy(port->ca_name, p->ca_name, sizeof(port->ca_name));
	port->portnum = p->num;
	port->base_lid = p->link == SIM_LINK_IB ? p->lid : 0;
	port->sm_lid = p->link == SIM_LINK_IB ? p->sm_lid : 0;
	port->state = p->present ? 4 : 1;
	port->phys_state = p->present ? 5 : 3;
	port->rate = p->link == SIM_LINK_IB ? 100 : 10;
	port->capmask = htobe32(p->cap_mask);
	if (p->present) {
		memcpy(&port->gid_prefix, g0, 8);
		memcpy(&port->port_guid, g0 + 8, 8);
	}
	port->pkeys_size = 1;
	port->pkeys = calloc(1, sizeof(uint16_t));
	if (port->pkeys)
		port->pkeys[0] = 0xffff;
	g_strlcpy(port->link_layer, p->link == SIM_LINK_IB ? "InfiniBand" : "Ethernet",
		  sizeof(port->link_layer));
}

int umad_get_ca(const char *ca_name, umad_ca_t *ca)
{
	const struct sim_ca *c;

	if (enter() < 0 || !(c = resolve_ca(ca_name))) {
		leave();
		return -ENODEV;
	}
	memset(ca, 0, sizeof(*ca));
	g_strlcpy(ca->ca_name, c->name, sizeof(ca->ca_name));
	ca->node_type = 1;
	ca->numports = (int)c->nports;
	g_strlcpy(ca->fw_ver, "1.0.0", sizeof(ca->fw_ver));
	g_strlcpy(ca->ca_type, "SIM", sizeof(ca->ca_type));
	g_strlcpy(ca->hw_ver, "0x0", sizeof(ca->hw_ver));
	ca->node_guid = htobe64(c->node_guid);
	ca->system_guid = htobe64(c->node_guid);
	/* libibumad indexes ports[] by port number; ports[0] stays NULL on a CA. */
	for (unsigned p = 0; p < c->nports && p + 1 < UMAD_CA_MAX_PORTS; p++) {
		ca->ports[p + 1] = calloc(1, sizeof(umad_port_t));
		if (ca->ports[p + 1])
			fill_port(&c->ports[p], ca->ports[p + 1]);
	}
	leave();
	return 0;
}

int umad_release_ca(umad_ca_t *ca)
{
	for (int i = 0; i < UMAD_CA_MAX_PORTS; i++) {
		if (!ca->ports[i])
			continue;
		free(ca->ports[i]->pkeys);
		free(ca->ports[i]);
		ca->ports[i] = NULL;
	}
	return 0;
}

int umad_get_port(const char *ca_name, int portnum, umad_port_t *port)
{
	const struct sim_ca *c;
	const struct sim_port *p;

	if (enter() < 0 || !(c = resolve_ca(ca_name)) || !(p = resolve_port(c, portnum))) {
		leave();
		return -ENODEV;
	}
	fill_port(p, port);
	leave();
	return 0;
}

int umad_release_port(umad_port_t *port)
{
	free(port->pkeys);
	port->pkeys = NULL;
	return 0;
}

int umad_get_ca_portguids(const char *ca_name, __be64 *portguids, int max)
{
	const struct sim_ca *c;
	int n;

	if (enter() < 0 || !(c = resolve_ca(ca_name))) {
		leave();
		return -ENODEV;
	}
	n = (int)c->nports + 1;
	if (portguids) {
		if (max < n) {
			leave();
			return -ENOMEM;
		}
		portguids[0] = htobe64(c->node_guid);
		for (unsigned p = 0; p < c->nports; p++)
			memcpy(&portguids[p + 1], c->ports[p].gids[0].gid + 8, 8);
	}
	leave();
	return n;
}

int umad_get_issm_path(const char *ca_name, int portnum, char path[], int max)
{
	const struct sim_ca *c;
	const struct sim_port *p;

	if (enter() < 0 || !(c = resolve_ca(ca_name)) || !(p = resolve_port(c, portnum))) {
		leave();
		return -ENODEV;
	}
	snprintf(path, (size_t)max, "%s/dev/issm%d", S.dir, p->umad_id);
	leave();
	return 0;
}

struct umad_device_node *umad_get_ca_device_list(void)
{
	struct umad_device_node *head = NULL, **tail = &head;

	if (enter() < 0) {
		leave();
		return NULL;
	}
	for (unsigned i = 0; i < S.fab->nca; i++) {
		struct umad_device_node *n = calloc(1, sizeof(*n));

		if (!n)
			break;
		n->ca_name = strdup(S.fab->cas[i].name);
		*tail = n;
		tail = &n->next;
	}
	leave();
	return head;
}

void umad_free_ca_device_list(struct umad_device_node *head)
{
	while (head) {
		struct umad_device_node *next = head->next;

		free((char *)head->ca_name);
		free(head);
		head = next;
	}
}

static gint cmp_nodes(gconstpointer a, gconstpointer b)
{
	const struct umad_device_node *x = *(struct umad_device_node *const *)a;
	const struct umad_device_node *y = *(struct umad_device_node *const *)b;

	return strcmp(x->ca_name, y->ca_name);
}

int umad_sort_ca_device_list(struct umad_device_node **head, size_t size)
{
	g_autoptr(GPtrArray) v = g_ptr_array_new();
	struct umad_device_node **tail = head;

	(void)size;
	for (struct umad_device_node *n = *head; n; n = n->next)
		g_ptr_array_add(v, n);
	g_ptr_array_sort(v, cmp_nodes);
	for (guint i = 0; i < v->len; i++) {
		struct umad_device_node *n = g_ptr_array_index(v, i);

		n->next = NULL;
		*tail = n;
		tail = &n->next;
	}
	return 0;
}

/* ---- open / close ------------------------------------------------------- */

static void free_simfd(struct simfd *s)
{
	pthread_mutex_destroy(&s->write_lock);
	for (int i = 0; i < MAX_AGENTS; i++)
		if (s->agents[i].paths)
			g_ptr_array_unref(s->agents[i].paths);
	g_free(s);
}

/* Undoes a half-made open; a finished one is stolen from it. */
static void simfd_discard(struct simfd **ps)
{
	struct simfd *s = *ps;

	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (*s->fifo_path)
		unlink(s->fifo_path);
	free_simfd(s);
}

/* FIFO names: CA.PORT.PID.IMAGE.SEQ.eEPOCH (the port's epoch at the open:
 * a fd opened before a device removal stays dead after a restore). */
static int make_fifo_fd(struct simfd *s)
{
	if (!S.image)
		S.image = g_random_int() | 1;
	g_snprintf(s->fifo_name, sizeof(s->fifo_name), "%s.%d.%d.%08x.%u.e%u", s->ca, s->port,
		   (int)getpid(), S.image, ++S.fifo_seq, s->epoch);
	if ((size_t)g_snprintf(s->fifo_path, sizeof(s->fifo_path), "%s/sock/%s", S.dir,
			       s->fifo_name) >= sizeof(s->fifo_path))
		return -ENAMETOOLONG;
	unlink(s->fifo_path);
	if (mkfifo(s->fifo_path, 0600) < 0)
		return -errno;
	s->fd = open(s->fifo_path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	/* A deep queue, like the kernel's; the default 64 KiB holds only ~190 MADs. */
	fcntl(s->fd, F_SETPIPE_SZ, 1 << 20);
	/* Held by every copy of the fd, wherever it goes: the agents' life. */
	if (flock(s->fd, LOCK_SH | LOCK_NB) < 0)
		return -errno;
	return 0;
}

/* A port's fault generator in memory shared with forked children, and
 * the lock that makes each decision one step of the one sequence. */
struct port_rng {
	int lock;
	struct sim_rng rng;
};

static void port_rng_unmap(gpointer p)
{
	munmap(p, sizeof(struct port_rng));
}

/* The fault generator of port @salt ("CA/PORT") in this process. */
static struct port_rng *port_rng(const char *salt)
{
	struct port_rng *r;

	if (!S.port_rngs)
		S.port_rngs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, port_rng_unmap);
	r = g_hash_table_lookup(S.port_rngs, salt);
	if (!r) {
		r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (r == MAP_FAILED)
			abort();
		sim_rng_seed(&r->rng, S.faults.seed, salt);
		g_hash_table_insert(S.port_rngs, g_strdup(salt), r);
	}
	return r;
}

/* The next fault decision of @r: a spin lock, since the holder may be
 * another process (it holds it for a few instructions). */
static void port_rng_decide(struct port_rng *r, struct sim_fault_decision *d)
{
	while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	sim_faults_decide(&S.faults, &r->rng, d);
	__atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}


static int open_locked(const char *ca_name, int portnum)
{
	__attribute__((cleanup(simfd_discard))) struct simfd *s = NULL;
	const struct sim_ca *c;
	const struct sim_port *p;
	g_autofree char *salt = NULL;
	int fd, rc;

	if (!(c = resolve_ca(ca_name)) || !(p = resolve_port(c, portnum)))
		return -ENODEV;
	if (!p->present)
		return -EIO;
	s = g_new0(struct simfd, 1);
	pthread_mutex_init(&s->write_lock, NULL);
	s->fd = -1;
	g_strlcpy(s->ca, c->name, sizeof(s->ca));
	s->port = p->num;
	s->epoch = p->epoch;
	s->stall_served = p->stall_serial; /* only stalls ordered from now on */
	s->owner = ++S.next_owner;
	rc = make_fifo_fd(s);
	if (rc < 0) {
		warn("cannot open %s:%d: %s", s->ca, s->port, g_strerror(-rc));
		return -EIO;
	}
	salt = g_strdup_printf("%s/%d", s->ca, s->port);
	s->rng = port_rng(salt);
	if (s->fd >= S.nfds) {
		int n = MAX(s->fd + 1, S.nfds * 2);

		S.fds = g_renew(struct simfd *, S.fds, n);
		memset(S.fds + S.nfds, 0, sizeof(*S.fds) * (size_t)(n - S.nfds));
		S.nfds = n;
	}
	fd = s->fd;
	S.fds[fd] = g_steal_pointer(&s);
	S.new_abi = true;
	if (S.debug)
		warn("open %s:%d -> fd %d", c->name, p->num, fd);
	return fd;
}

/*
 * Take over @fd, a umad fd another process opened: find its FIFO (by inode)
 * in DIR/sock, its port and epoch in the FIFO's name, and its agents in the
 * registry. Return: its state, or NULL when @fd is no umad fd.
 */
static struct simfd *adopt_locked(int fd)
{
	g_autofree char *sdir = g_build_filename(S.dir, "sock", NULL);
	g_autofree char *adir = g_build_filename(S.dir, "agents", NULL);
	g_autoptr(GDir) socks = NULL;
	g_autoptr(GDir) agents = NULL;
	g_auto(GStrv) parts = NULL;
	g_autofree char *found = NULL;
	g_autofree char *salt = NULL;
	struct stat st;
	struct simfd *s;
	const char *name;
	unsigned n;

	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		return NULL;
	socks = g_dir_open(sdir, 0, NULL);
	while (socks && !found && (name = g_dir_read_name(socks))) {
		g_autofree char *path = g_build_filename(sdir, name, NULL);
		struct stat e;

		if (stat(path, &e) == 0 && e.st_ino == st.st_ino && e.st_dev == st.st_dev)
			found = g_strdup(name);
	}
	if (!found)
		return NULL;
	/* CA.PORT.PID.IMAGE.SEQ.eEPOCH; the CA name may hold dots. */
	parts = g_strsplit(found, ".", -1);
	n = g_strv_length(parts);
	if (n < 6 || parts[n - 1][0] != 'e')
		return NULL;
	s = g_new0(struct simfd, 1);
	pthread_mutex_init(&s->write_lock, NULL);
	s->fd = fd;
	s->port = atoi(parts[n - 5]);
	s->epoch = (uint32_t)strtoul(parts[n - 1] + 1, NULL, 10);
	{
		/* The CA name: the parts before PORT, joined again. */
		g_autoptr(GString) ca = g_string_new(parts[0]);

		for (unsigned i = 1; i + 5 < n; i++)
			g_string_append_printf(ca, ".%s", parts[i]);
		g_strlcpy(s->ca, ca->str, sizeof(s->ca));
	}
	s->owner = ++S.next_owner;
	g_strlcpy(s->fifo_name, found, sizeof(s->fifo_name));
	g_snprintf(s->fifo_path, sizeof(s->fifo_path), "%s/%s", sdir, found);
	salt = g_strdup_printf("%s/%d", s->ca, s->port);
	s->rng = port_rng(salt);
	{
		const struct sim_port *p = sim_fabric_find_port(S.fab, s->ca, s->port);

		s->stall_served = p ? p->stall_serial : 0;
	}
	/* Its agents: every registry entry that names its FIFO. */
	agents = g_dir_open(adir, 0, NULL);
	while (agents && (name = g_dir_read_name(agents))) {
		char *path = g_build_filename(adir, name, NULL);
		struct sim_reg r;
		struct agent *a;

		if (*name == '.' || sim_reg_read(path, &r) < 0 || strcmp(r.fifo, found) != 0 ||
		    r.agent >= MAX_AGENTS) {
			g_free(path);
			continue;
		}
		a = &s->agents[r.agent];
		if (!a->used) {
			a->used = true;
			a->serial = r.serial;
			a->hi_tid = r.hi_tid;
			a->paths = g_ptr_array_new_with_free_func(g_free);
		}
		g_ptr_array_add(a->paths, path);
	}
	if (fd >= S.nfds) {
		int len = MAX(fd + 1, S.nfds * 2);

		S.fds = g_renew(struct simfd *, S.fds, len);
		memset(S.fds + S.nfds, 0, sizeof(*S.fds) * (size_t)(len - S.nfds));
		S.nfds = len;
	}
	/* Not S.new_abi: libibumad switches to the 64-byte header only when
	 * this process opens a port itself (the file's pkey ABI was set by
	 * its opener); a process that only inherited the fd reads and writes
	 * with the old header, and the kernel refuses both. */
	S.fds[fd] = s;
	if (S.debug)
		warn("took over fd %d (%s)", fd, found);
	return s;
}

int umad_open_port(const char *ca_name, int portnum)
{
	int rc = enter();

	/* libibumad's answer when the umad ABI file cannot be read. */
	if (rc < 0)
		rc = -EOPNOTSUPP;
	else
		rc = open_locked(ca_name, portnum);
	leave();
	return rc;
}

static void drop_agent(struct agent *a)
{
	for (guint i = 0; a->paths && i < a->paths->len; i++)
		unlink(g_ptr_array_index(a->paths, i));
	if (a->paths)
		g_ptr_array_unref(a->paths);
	memset(a, 0, sizeof(*a));
}

int umad_close_port(int portid)
{
	struct simfd *s;
	bool any = false;

	pthread_mutex_lock(&S.lock);
	s = get_fd(portid);
	if (!s) {
		pthread_mutex_unlock(&S.lock);
		close(portid);
		return 0;
	}
	S.fds[portid] = NULL;
	close(s->fd);
	/* As the kernel's: the agents end with the file, not with this copy
	 * of it (another process, or a service manager's fd store, may hold
	 * one). */
	if (sim_fifo_is_orphan(S.dir, s->fifo_name)) {
		for (int i = 0; i < MAX_AGENTS; i++) {
			any |= s->agents[i].used;
			drop_agent(&s->agents[i]);
		}
		if (any)
			sim_shared_bump(S.sh);
		unlink(s->fifo_path);
	}
	sim_defer_forget(s->owner);
	free_simfd(s);
	pthread_mutex_unlock(&S.lock);
	return 0;
}

int umad_get_fd(int portid)
{
	return portid;
}

/* ---- registration ------------------------------------------------------- */

static bool rmpp_class(unsigned c)
{
	return c == 0x03 || c == 0x06 || c == 0x10 || c == 0x12 || (c >= 0x30 && c <= 0x4f);
}

/* Creates @path holding @tmp's content, unless a live agent holds it already. */
static int claim(const char *tmp, const char *path)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct sim_reg r;

		if (link(tmp, path) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
		/* The holder may have died without unregistering: reclaim its entry. */
		if (sim_reg_read(path, &r) == 0 && !sim_reg_is_stale(S.dir, &r))
			return -EINVAL;
		unlink(path);
	}
	return -EINVAL;
}

/* The kernel's checks and exclusivity, returning the agent id or -errno. */
static int register_agent(int portid, unsigned qpn, int mclass, int version, int rmpp,
			  const uint64_t mask[2], uint32_t oui)
{
	struct simfd *s = get_fd(portid);
	const struct sim_port *p;
	struct agent *a = NULL;
	char content[256];
	g_autofree char *tmp = NULL;
	int id = -1, fd, rc = 0;

	if (!s)
		return -ENOTTY;
	if (fd_dead(s))
		return -EPIPE;
	p = sim_fabric_find_port(S.fab, s->ca, s->port);
	if (mclass) {
		if (version < 0 || version >= 0x83 || mclass < 0 || (mclass >= 0x50 && mclass != 0x81))
			return -EINVAL;
		if (rmpp_class((unsigned)mclass) ? rmpp > 1 : rmpp != 0)
			return -EINVAL;
		if ((mclass >= 0x30 && mclass <= 0x4f) && !oui)
			return -EINVAL;
		if ((mclass == 0x01 || mclass == 0x81) != (qpn == 0))
			return -EINVAL;
		/* RoCE ports have no QP0. */
		if (qpn == 0 && p->link == SIM_LINK_ETH)
			return -EPROTONOSUPPORT;
	}
	/* `umad-sim fail-register`: a kernel that refuses send-only agents. */
	if (p->fail_register && (!mclass || !(mask[0] | mask[1])))
		return -p->fail_register;
	for (int i = 0; i < MAX_AGENTS; i++)
		if (!s->agents[i].used) {
			id = i;
			break;
		}
	if (id < 0)
		return -ENOMEM;
	a = &s->agents[id];
	a->paths = g_ptr_array_new_with_free_func(g_free);
	a->serial = ++S.next_serial;
	a->hi_tid = __atomic_add_fetch(&S.sh->next_hi_tid, 1, __ATOMIC_SEQ_CST) & 0xffffff;
	a->mclass = (uint8_t)mclass;
	g_snprintf(content, sizeof(content), "pid=%d fifo=%s agent=%d serial=%u hi_tid=%u\n",
		   (int)getpid(), s->fifo_name, id, a->serial, a->hi_tid);
	tmp = g_strdup_printf("%s/agents/.tmp.%d.%u", S.dir, (int)getpid(), a->serial);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = -errno;
	else if (write(fd, content, strlen(content)) != (ssize_t)strlen(content))
		rc = -EIO;
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		char *path = sim_reg_tid_path(S.dir, s->ca, s->port, a->hi_tid);

		g_ptr_array_add(a->paths, path);
		unlink(path); /* hi_tid wrapped around: the old owner is long gone */
		rc = link(tmp, path) == 0 ? 0 : -errno;
	}
	for (unsigned m = 0; rc == 0 && mclass && m < 128; m++) {
		char *path;

		if (!(mask[m / 64] >> (m % 64) & 1))
			continue;
		path = sim_reg_method_path(S.dir, s->ca, s->port, (unsigned)mclass,
					   (unsigned)version, m,
					   mclass >= 0x30 && mclass <= 0x4f ? oui : 0);
		rc = claim(tmp, path);
		if (rc == 0)
			g_ptr_array_add(a->paths, path);
		else
			g_free(path);
	}
	unlink(tmp);
	if (rc < 0) {
		drop_agent(a);
		return rc;
	}
	a->used = true;
	sim_shared_bump(S.sh);
	if (S.debug)
		warn("fd %d: agent %d class 0x%x v%d hi_tid %u", portid, id, mclass, version,
		     a->hi_tid);
	return id;
}

static void mask_from_longs(long *method_mask, uint64_t mask[2])
{
	mask[0] = mask[1] = 0;
	if (method_mask)
		memcpy(mask, method_mask, 16);
}

int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
		  long method_mask[16 / sizeof(long)])
{
	uint64_t mask[2];
	unsigned qpn = (mgmt_class == 0x1 || mgmt_class == 0x81) ? 0 : 1;
	int rc;

	mask_from_longs(method_mask, mask);
	if (enter() < 0)
		rc = -ENOTTY;
	else
		rc = register_agent(portid, qpn, mgmt_class, mgmt_version, rmpp_version, mask,
				    OPENIB_OUI);
	leave();
	if (rc >= 0)
		return rc;
	/* libibumad flattens every failure to -EPERM; errno keeps the ioctl's reason. */
	errno = -rc;
	return -EPERM;
}

int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version, uint8_t oui[3],
		      long method_mask[16 / sizeof(long)])
{
	uint64_t mask[2];
	uint32_t o = (uint32_t)oui[0] << 16 | (uint32_t)oui[1] << 8 | oui[2];
	int rc;

	if (mgmt_class < 0x30 || mgmt_class > 0x4f)
		return -EINVAL;
	mask_from_longs(method_mask, mask);
	if (enter() < 0)
		rc = -ENOTTY;
	else
		rc = register_agent(portid, 1, mgmt_class, 1, rmpp_version, mask, o);
	leave();
	if (rc >= 0)
		return rc;
	errno = -rc;
	return -EPERM;
}

int umad_register2(int port_fd, struct umad_reg_attr *attr, uint32_t *agent_id)
{
	unsigned qpn;
	int rc;

	if (!attr || !agent_id)
		return EINVAL;
	if (attr->flags & ~(uint32_t)UMAD_USER_RMPP) {
		attr->flags = UMAD_USER_RMPP;
		return EINVAL;
	}
	if (attr->oui > 0xffffff)
		return EINVAL;
	qpn = (attr->mgmt_class == 0x1 || attr->mgmt_class == 0x81) ? 0 : 1;
	if (enter() < 0)
		rc = -ENOTTY;
	else
		rc = register_agent(port_fd, qpn, attr->mgmt_class, attr->mgmt_class_version,
				    attr->rmpp_version, attr->method_mask, attr->oui);
	leave();
	if (rc < 0) {
		errno = -rc;
		return -rc;
	}
	*agent_id = (uint32_t)rc;
	return 0;
}

int umad_unregister(int portid, int agentid)
{
	struct simfd *s;
	int rc = 0;

	enter();
	s = get_fd(portid);
	if (!s)
		rc = ENOTTY;
	else if (agentid < 0 || agentid >= MAX_AGENTS || !s->agents[agentid].used)
		rc = EINVAL;
	else {
		drop_agent(&s->agents[agentid]);
		sim_shared_bump(S.sh);
	}
	leave();
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

/* ---- send --------------------------------------------------------------- */

static bool is_response(uint8_t method)
{
	return (method & 0x80) || method == 0x07; /* TrapRepress */
}

static struct route *lookup_route(const struct sim_port *dst, bool by_tid, uint8_t mclass,
				  uint8_t version, uint8_t method, uint32_t oui, uint32_t hi_tid)
{
	struct route *r;
	g_autofree char *path = NULL;

	for (unsigned i = 0; i < S.nroutes; i++) {
		r = &S.routes[i];
		if (r->by_tid == by_tid && r->port == dst->num && strcmp(r->ca, dst->ca_name) == 0 &&
		    (by_tid ? r->hi_tid == hi_tid
			    : (r->mclass == mclass && r->version == version && r->method == method &&
			       r->oui == oui)))
			return r;
	}
	if (S.nroutes < ROUTE_CACHE) {
		r = &S.routes[S.nroutes++];
	} else {
		r = &S.routes[S.evict++ % ROUTE_CACHE];
		if (r->wfd >= 0)
			close(r->wfd);
	}
	memset(r, 0, sizeof(*r));
	r->wfd = -1;
	r->by_tid = by_tid;
	g_strlcpy(r->ca, dst->ca_name, sizeof(r->ca));
	r->port = dst->num;
	r->mclass = mclass;
	r->version = version;
	r->method = method;
	r->oui = oui;
	r->hi_tid = hi_tid;
	path = by_tid ? sim_reg_tid_path(S.dir, dst->ca_name, dst->num, hi_tid)
		      : sim_reg_method_path(S.dir, dst->ca_name, dst->num, mclass, version, method,
					    oui);
	/* A dead holder is treated as absent: its MADs would go nowhere. */
	r->found = sim_reg_read(path, &r->reg) == 0 && !sim_reg_is_stale(S.dir, &r->reg);
	return r;
}

static int route_fd(struct route *r)
{
	if (r->wfd < 0) {
		g_autofree char *path = g_strdup_printf("%s/sock/%s", S.dir, r->reg.fifo);

		r->wfd = sim_fifo_open_writer(path);
	}
	return r->wfd;
}

static char *route_path(const struct route *r)
{
	return g_strdup_printf("%s/sock/%s", S.dir, r->reg.fifo);
}

/* Finds the port that owns @gid among ports of the same link layer. */
static const struct sim_port *port_by_gid(enum sim_link link, const uint8_t gid[16], int *idx)
{
	for (unsigned i = 0; i < S.fab->nca; i++)
		for (unsigned p = 0; p < S.fab->cas[i].nports; p++) {
			const struct sim_port *port = &S.fab->cas[i].ports[p];

			if (!port->present || port->link != link)
				continue;
			*idx = sim_port_find_gid(port, gid);
			if (*idx >= 0)
				return port;
		}
	return NULL;
}

static const struct sim_port *port_by_lid(uint16_t lid)
{
	for (unsigned i = 0; i < S.fab->nca; i++)
		for (unsigned p = 0; p < S.fab->cas[i].nports; p++) {
			const struct sim_port *port = &S.fab->cas[i].ports[p];

			if (port->present && port->link == SIM_LINK_IB && port->lid == lid)
				return port;
		}
	return NULL;
}

/* Fills the address a receiver sees: the sender's, as the kernel builds it from the WC. */
static void rx_addr(ib_mad_addr_t *out, const struct sim_port *from, const ib_mad_addr_t *sent,
		    const uint8_t sgid[16], int dst_idx, unsigned qpn)
{
	memset(out, 0, sizeof(*out));
	out->qpn = htobe32(qpn);
	out->lid = htobe16(from->link == SIM_LINK_IB ? from->lid : 0);
	out->sl = sent->sl;
	if (sent->grh_present) {
		out->grh_present = 1;
		out->gid_index = (uint8_t)dst_idx;
		out->hop_limit = sent->hop_limit;
		out->traffic_class = sent->traffic_class;
		out->flow_label = sent->flow_label;
		memcpy(out->gid, sgid, 16);
	}
}

static void put_or_drop(int fd, const void *pkt)
{
	if (fd >= 0)
		sim_fifo_put(fd, pkt);
}

static void put_held(struct simfd *s)
{
	char path[PATH_MAX];
	union pkt held;

	if (sim_defer_take_held(s->owner, path, held.bytes)) {
		int fd = sim_fifo_open_writer(path);

		put_or_drop(fd, held.bytes);
		if (fd >= 0)
			close(fd);
	}
}

/*
 * The kernel answers a Get or Set that no agent takes with GetResp status
 * 0x000C (unsupported method/attribute), so the requester's agent sees it.
 */
static void auto_reply(const struct sim_port *me, const struct sim_port *dst,
		       const union pkt *req, const ib_mad_addr_t *sent, int dst_idx)
{
	uint64_t tid;
	uint32_t hi;
	struct route *r;
	union pkt rsp;
	ib_mad_addr_t back = *sent;

	memcpy(&tid, req->s.mad + 8, 8);
	hi = (uint32_t)(be64toh(tid) >> 32);
	r = lookup_route(me, true, 0, 0, 0, 0, hi);
	if (!r->found)
		return;
	rsp = *req;
	rsp.s.h.serial = r->reg.serial;
	rsp.s.mad[3] = 0x81;
	rsp.s.mad[4] = 0x00;
	rsp.s.mad[5] = 0x0c;
	rsp.s.u.agent_id = r->reg.agent;
	if (sent->grh_present)
		memcpy(back.gid, dst->gids[dst_idx].gid, 16);
	rx_addr(&rsp.s.u.addr, dst, &back, back.gid, sent->gid_index, 1);
	put_or_drop(route_fd(r), rsp.bytes);
}

static int do_send(int portid, int agentid, struct ib_user_mad *m, int length, int timeout_ms,
		   int retries)
{
	struct simfd *s = get_fd(portid);
	const struct sim_port *me, *dst = NULL;
	const uint8_t *mad = m->data;
	static const uint8_t zero[16];
	const uint8_t *sgid = zero;
	struct sim_fault_decision d = { 0 };
	struct route *r = NULL;
	struct agent *a;
	union pkt pkt;
	int dst_idx = 0, rc;
	uint64_t tid;
	uint8_t method, mclass;
	unsigned qpn;

	if (!s)
		return -EBADF;
	/* Every sim fd speaks the pkey ABI (its opener enabled it): a header
	 * of the old ABI (umad_size() 56) is garbage to ib_umad_write. */
	if (umad_size() != SIM_UMAD_HDR)
		return -EINVAL;
	/* ib_umad_write: at least the RMPP header, at most one 256-byte MAD. */
	if (length < 0 || length + SIM_UMAD_HDR < SIM_UMAD_HDR + 36 || length > SIM_MAD_SIZE)
		return -EINVAL;
	if (agentid < 0 || agentid >= MAX_AGENTS)
		return -EINVAL;
	if (fd_dead(s))
		return -EIO;
	a = &s->agents[agentid];
	if (!a->used)
		return -EIO;
	me = sim_fabric_find_port(S.fab, s->ca, s->port);
	if (me->link == SIM_LINK_ETH && !m->addr.grh_present)
		return -EINVAL;
	if (m->addr.grh_present) {
		if (m->addr.gid_index >= me->gid_len)
			return -EINVAL;
		sgid = me->gids[m->addr.gid_index].gid;
		if (sim_gid_is_zero(sgid))
			return -ENODATA;
	}
	if (S.faults.any) {
		port_rng_decide(s->rng, &d);
		if (d.fail_errno)
			return -d.fail_errno;
	}
	if (m->addr.grh_present) {
		dst = port_by_gid(me->link, m->addr.gid, &dst_idx);
		if (!dst && me->link == SIM_LINK_ETH) {
			/* Neighbour resolution fails in write(), after its timeout,
			 * or once a test removes DIR/hold-unreachable. Only this
			 * fd's writers wait (write_lock): other fds, and the rest
			 * of the library, go on. */
			unsigned ms = S.fab->unreachable_delay_ms;
			g_autofree char *hold = g_build_filename(S.dir, "hold-unreachable", NULL);

			pthread_mutex_unlock(&S.lock);
			if (ms)
				g_usleep((gulong)ms * 1000);
			while (access(hold, F_OK) == 0)
				g_usleep(2000);
			pthread_mutex_lock(&S.lock);
			return -ETIMEDOUT;
		}
	} else {
		dst = port_by_lid(be16toh(m->addr.lid));
	}

	memset(&pkt, 0, sizeof(pkt));
	pkt.s.h.magic = SIM_PKT_MAGIC;
	pkt.s.h.kind = SIM_PKT_DATA;
	pkt.s.h.mad_len = SIM_MAD_SIZE;
	memcpy(pkt.s.mad, mad, (size_t)length);
	mclass = pkt.s.mad[1];
	method = pkt.s.mad[3];
	memcpy(&tid, pkt.s.mad + 8, 8);
	tid = be64toh(tid);
	if (!is_response(method)) {
		/* Only the low half survives; the top is the sending agent's hi_tid. */
		tid = (uint64_t)a->hi_tid << 32 | (tid & 0xffffffffull);
		uint64_t be = htobe64(tid);

		memcpy(pkt.s.mad + 8, &be, 8);
	}
	qpn = (mclass == 0x01 || mclass == 0x81) ? 0 : 1;
	/* is_duplicate(): the same TID and class still waiting for a response. */
	if (sim_defer_in_flight(s->owner, tid, mclass))
		return -EINVAL;

	/* validate_mad() on the receiving side drops these before any agent lookup. */
	if (pkt.s.mad[0] != 1 ||
	    (mclass == 0x07 && method != 0x03 && be16toh(*(uint16_t *)(pkt.s.mad + 16)) != 0x0001))
		dst = NULL;
	if (dst) {
		uint32_t oui = 0;

		if (mclass >= 0x30 && mclass <= 0x4f)
			oui = (uint32_t)pkt.s.mad[37] << 16 | (uint32_t)pkt.s.mad[38] << 8 |
			      pkt.s.mad[39];
		r = is_response(method)
			    ? lookup_route(dst, true, 0, 0, 0, 0, (uint32_t)(tid >> 32))
			    : lookup_route(dst, false, mclass, pkt.s.mad[2], method & 0x7f, oui, 0);
		if (!r->found) {
			if ((method == 0x01 || method == 0x02) && !d.drop)
				auto_reply(me, dst, &pkt, &m->addr, dst_idx);
			r = NULL;
		}
	}
	if (r) {
		pkt.s.h.serial = r->reg.serial;
		pkt.s.u.agent_id = r->reg.agent;
		pkt.s.u.length = SIM_UMAD_HDR + SIM_MAD_SIZE;
		rx_addr(&pkt.s.u.addr, me, &m->addr, sgid, dst_idx, qpn);
	}

	if (timeout_ms > 0) {
		union pkt echo;
		g_autofree char *dpath = r ? route_path(r) : NULL;

		/* The kernel hands back the original header and send address, status ETIMEDOUT. */
		memset(&echo, 0, sizeof(echo));
		echo.s.h.magic = SIM_PKT_MAGIC;
		echo.s.h.kind = SIM_PKT_ECHO;
		echo.s.h.mad_len = SIM_MAD_HDR;
		echo.s.h.serial = a->serial;
		echo.s.u = *m;
		echo.s.u.status = ETIMEDOUT;
		memcpy(echo.s.mad, pkt.s.mad, SIM_MAD_HDR);
		rc = sim_defer_timeout(s->owner, tid, mclass, d.drop ? NULL : dpath, pkt.bytes,
				       s->fifo_path, echo.bytes, (unsigned)timeout_ms,
				       retries > 0 ? (unsigned)retries : 0);
		if (rc < 0)
			return rc;
	}

	if (!r || d.drop) {
		put_held(s);
		return 0;
	}
	if (d.delay_ms) {
		g_autofree char *dpath = route_path(r);

		for (int i = 0; i < (d.dup ? 2 : 1); i++)
			sim_defer_deliver(s->owner, dpath, pkt.bytes, d.delay_ms);
		return 0;
	}
	if (d.reorder && !sim_defer_has_held(s->owner)) {
		g_autofree char *dpath = route_path(r);

		/* Goes out after the next MAD of this fd: the two swap places. */
		sim_defer_hold(s->owner, dpath, pkt.bytes, REORDER_WINDOW_MS);
		if (d.dup)
			put_or_drop(route_fd(r), pkt.bytes);
		return 0;
	}
	put_or_drop(route_fd(r), pkt.bytes);
	if (d.dup)
		put_or_drop(route_fd(r), pkt.bytes);
	put_held(s);
	return 0;
}

/*
 * `umad-sim stall-send`: the port's next write, by whatever process, waits
 * (its fd's write lock held, as the kernel holds the file's mutex). The
 * first writer to create DIR/stall-send.CA.PORT.SERIAL serves it.
 * Return: how long to wait, or 0.
 */
static unsigned send_stall_claim_locked(const struct simfd *s)
{
	const struct sim_port *p = sim_fabric_find_port(S.fab, s->ca, s->port);
	g_autofree char *path = NULL;
	int fd;

	if (!p || !p->send_stall_serial)
		return 0;
	path = g_strdup_printf("%s/stall-send.%s.%d.%u", S.dir, p->ca_name, p->num,
			       p->send_stall_serial);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	return p->send_stall_ms;
}

int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms, int retries)
{
	struct ib_user_mad *m = umad;
	struct simfd *s;
	int rc;

	errno = 0;
	m->timeout_ms = (uint32_t)timeout_ms;
	m->retries = (uint32_t)retries;
	m->agent_id = (uint32_t)agentid;
	/* The fd's write lock first, then the library's: a writer that waits
	 * for its address releases the library's lock, never its fd's. */
	(void)enter();
	s = get_fd(portid);
	leave();
	if (s)
		pthread_mutex_lock(&s->write_lock);
	rc = enter();
	if (rc == 0 && s) {
		unsigned ms = send_stall_claim_locked(s);

		if (ms) {
			leave();
			g_usleep((gulong)ms * 1000);
			rc = enter();
		}
	}
	if (rc == 0)
		rc = do_send(portid, agentid, m, length, timeout_ms, retries);
	leave();
	if (s)
		pthread_mutex_unlock(&s->write_lock);
	if (rc == 0)
		return 0;
	/* libibumad: -EIO whatever went wrong; errno holds write()'s reason. */
	errno = -rc;
	return -EIO;
}

/* ---- receive ------------------------------------------------------------ */

/*
 * ib_umad_read puts a packet that does not fit back at the head of the
 * queue. The queue is the FIFO: what is in it is taken out and written back
 * behind @pkt (the FIFO holds at most 1 MiB, and only the one reader takes
 * from it), so that it stays there for whichever process reads next.
 */
static int requeue_head(struct simfd *s, const union pkt *pkt)
{
	g_autofree uint8_t *rest = g_malloc(1 << 20);
	size_t len = 0;
	ssize_t n;

	while (len < (1u << 20) && (n = read(s->fd, rest + len, (1u << 20) - len)) > 0)
		len += (size_t)n;
	if (write(s->fd, pkt->bytes, SIM_PKT_SIZE) != SIM_PKT_SIZE)
		return -EIO;
	for (size_t off = 0; off < len; off += SIM_PKT_SIZE)
		if (write(s->fd, rest + off, SIM_PKT_SIZE) != SIM_PKT_SIZE)
			return -EIO;
	return 0;
}

/* Returns the agent id, -EAGAIN when nothing is queued, or another -errno. */
static int try_recv(int portid, struct ib_user_mad *m, int *length)
{
	struct simfd *s = get_fd(portid);
	union pkt pkt;

	if (!s)
		return -EBADF;
	for (;;) {
		const struct agent *a;
		uint32_t id;
		uint64_t tid;
		ssize_t n;

		if (fd_dead(s))
			return -EIO; /* agents_dead: the queued WAKE keeps the fd readable */
		n = read(s->fd, pkt.bytes, SIM_PKT_SIZE);
		if (n < 0)
			return errno == EINTR ? -EINTR : -errno;
		if (n != SIM_PKT_SIZE || pkt.s.h.magic != SIM_PKT_MAGIC)
			continue;
		if (pkt.s.h.kind == SIM_PKT_WAKE)
			continue;
		id = pkt.s.u.agent_id;
		a = id < MAX_AGENTS ? &s->agents[id] : NULL;
		/* An agent unregistered while its MADs were in flight: the kernel drops them. */
		if (!a || !a->used || a->serial != pkt.s.h.serial)
			continue;
		/* ib_umad_read: the buffer (libibumad reads umad_size() +
		 * *length) must hold the header and the MAD. */
		if ((int)umad_size() + *length < SIM_UMAD_HDR + (int)pkt.s.h.mad_len)
			return requeue_head(s, &pkt) < 0 ? -EIO : -EINVAL;
		memcpy(&tid, pkt.s.mad + 8, 8);
		if (pkt.s.h.kind == SIM_PKT_DATA && is_response(pkt.s.mad[3]))
			sim_defer_cancel(s->owner, be64toh(tid), pkt.s.mad[1]);
		memcpy(m, &pkt.s.u, SIM_UMAD_HDR + pkt.s.h.mad_len);
		*length = pkt.s.h.mad_len;
		return (int)id;
	}
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* `umad-sim stall`: the first receive after it sleeps (unlocked), as if
 * the kernel held the reader up. */
static void recv_stall_locked(int portid)
{
	struct simfd *s = get_fd(portid);
	const struct sim_port *p = s ? sim_fabric_find_port(S.fab, s->ca, s->port) : NULL;
	unsigned ms;

	if (!p || !p->stall_serial || p->stall_serial == s->stall_served)
		return;
	s->stall_served = p->stall_serial;
	ms = p->stall_ms;
	pthread_mutex_unlock(&S.lock);
	g_usleep((gulong)ms * 1000);
	pthread_mutex_lock(&S.lock);
}

int umad_recv(int portid, void *umad, int *length, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
	int rc;

	errno = 0;
	if (!umad || !length) {
		errno = EINVAL;
		return -EINVAL;
	}
	for (;;) {
		if (timeout_ms != 0) {
			struct pollfd p = { .fd = portid, .events = POLLIN };
			int wait = -1, n;

			if (timeout_ms > 0) {
				uint64_t now = mono_ms();

				wait = now >= deadline ? 0 : (int)(deadline - now);
			}
			n = poll(&p, 1, wait);
			if (n == 0) {
				errno = ETIMEDOUT;
				return -ETIMEDOUT;
			}
			if (n < 0) {
				if (!errno)
					errno = EIO;
				return -EIO;
			}
		}
		rc = enter();
		if (rc == 0)
			recv_stall_locked(portid);
		if (rc == 0)
			rc = try_recv(portid, umad, length);
		leave();
		/* Only dropped packets were readable: wait on while time is left. */
		if (rc == -EAGAIN && timeout_ms != 0)
			continue;
		break;
	}
	if (rc < 0)
		errno = -rc;
	return rc;
}

int umad_poll(int portid, int timeout_ms)
{
	struct pollfd p = { .fd = portid, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	if (n == 1)
		return 0;
	if (n == 0)
		return -ETIMEDOUT;
	return -EIO;
}

/* ---- buffer helpers ----------------------------------------------------- */

size_t umad_size(void)
{
	/* libibumad: the old 56-byte header until an open enabled the P_Key ABI. */
	return S.new_abi ? sizeof(struct ib_user_mad) : sizeof(struct ib_user_mad) - 8;
}

void *umad_get_mad(void *umad)
{
	return (uint8_t *)umad + umad_size();
}

int umad_status(void *umad)
{
	return (int)((struct ib_user_mad *)umad)->status;
}

ib_mad_addr_t *umad_get_mad_addr(void *umad)
{
	return &((struct ib_user_mad *)umad)->addr;
}

int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)
{
	struct ib_user_mad *m = umad;

	m->addr.qpn = htobe32((uint32_t)dqp);
	m->addr.lid = htobe16((uint16_t)dlid);
	m->addr.qkey = htobe32((uint32_t)qkey);
	m->addr.sl = (uint8_t)sl;
	return 0;
}

int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey)
{
	struct ib_user_mad *m = umad;

	m->addr.qpn = dqp;
	m->addr.lid = dlid;
	m->addr.qkey = qkey;
	m->addr.sl = (uint8_t)sl;
	return 0;
}

int umad_set_grh(void *umad, void *mad_addr)
{
	struct ib_user_mad *m = umad;
	ib_mad_addr_t *a = mad_addr;

	if (!a) {
		m->addr.grh_present = 0;
		return 0;
	}
	m->addr.grh_present = 1;
	memcpy(m->addr.gid, a->gid, 16);
	/* umad_set_grh takes the flow label in host order. */
	m->addr.flow_label = htobe32((uint32_t)a->flow_label);
	m->addr.hop_limit = a->hop_limit;
	m->addr.traffic_class = a->traffic_class;
	return 0;
}

int umad_set_pkey(void *umad, int pkey_index)
{
	if (S.new_abi)
		((struct ib_user_mad *)umad)->addr.pkey_index = (uint16_t)pkey_index;
	return 0;
}

int umad_get_pkey(void *umad)
{
	return S.new_abi ? ((struct ib_user_mad *)umad)->addr.pkey_index : 0;
}

int umad_debug(int level)
{
	if (level >= 0)
		S.debug = level;
	return S.debug;
}

void umad_addr_dump(ib_mad_addr_t *addr)
{
	char gid[46];

	sim_gid_format(addr->gid, gid);
	fprintf(stderr,
		"qpn %u qkey 0x%x lid %u sl %u grh_present %u gid_index %u hop_limit %u "
		"traffic_class %u gid %s flow_label %u pkey_index %u\n",
		be32toh(addr->qpn), be32toh(addr->qkey), be16toh(addr->lid), addr->sl,
		addr->grh_present, addr->gid_index, addr->hop_limit, addr->traffic_class, gid,
		be32toh(addr->flow_label), addr->pkey_index);
}

void umad_dump(void *umad)
{
	struct ib_user_mad *m = umad;

	fprintf(stderr, "agent id %u status %u timeout %u\n", m->agent_id, m->status,
		m->timeout_ms);
	umad_addr_dump(&m->addr);
}
