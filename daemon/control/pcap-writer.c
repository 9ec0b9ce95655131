/* SPDX-License-Identifier: MIT */
/* Owns --trace-pcap: the capture file writer and the synthesized
 * InfiniBand packets (pcap-writer.h). */
#include "fd-write.h"
#include "pcap-writer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define IB_LNH_GRH 0x3
#define IB_NEXT_HEADER_BTH 0x1b
#define IB_OPCODE_UD_SEND_ONLY 0x64
#define IB_DEFAULT_PKEY 0xffff
#define IB_DEFAULT_HOP_LIMIT 64

struct PcapWriter {
	char *path;
	int fd;
	uint16_t local_lid;
	uint32_t psn;
	uint64_t packets;
	off_t size; /* bytes of whole records written */
	bool disabled;
};

/* Reflected CRC-32 (the Ethernet one), as the ICRC uses. */
static uint32_t pcap_crc32_update(uint32_t crc, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return crc;
}

uint32_t pcap_ib_icrc(const uint8_t *pkt, size_t len)
{
	/* The LRH is replaced by 64 one bits; in the GRH the traffic class,
	 * flow label and hop limit are ones; in the BTH the reserved byte. */
	static const uint8_t lrh_ones[PCAP_IB_LRH_LEN] = { 0xff, 0xff, 0xff, 0xff,
						      0xff, 0xff, 0xff, 0xff };
	uint8_t hdr[PCAP_IB_GRH_LEN + PCAP_IB_BTH_LEN];
	uint32_t crc = 0xffffffffu;

	memcpy(hdr, pkt + PCAP_IB_LRH_LEN, sizeof(hdr));
	hdr[0] |= 0x0f;
	hdr[1] = hdr[2] = hdr[3] = 0xff;
	hdr[7] = 0xff;
	hdr[PCAP_IB_GRH_LEN + 4] = 0xff;
	crc = pcap_crc32_update(crc, lrh_ones, sizeof(lrh_ones));
	crc = pcap_crc32_update(crc, hdr, sizeof(hdr));
	crc = pcap_crc32_update(crc, pkt + PCAP_IB_LRH_LEN + sizeof(hdr), len - PCAP_IB_LRH_LEN - sizeof(hdr));
	return ~crc;
}

uint16_t pcap_ib_vcrc(const uint8_t *pkt, size_t len)
{
	/* CRC-16, polynomial 0x100B, reflected (0xd008), ones in and out. */
	uint16_t crc = 0xffff;

	for (size_t i = 0; i < len; i++) {
		crc ^= pkt[i];
		for (int k = 0; k < 8; k++)
			crc = (uint16_t)((crc >> 1) ^ (0xd008u & (0u - (crc & 1u))));
	}
	return (uint16_t)~crc;
}

/* CRCs go on the wire least significant byte first, like Ethernet's FCS
 * (and like soft-RoCE writes the ICRC). */
static void pcap_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

size_t pcap_ib_packet_build(const RelayEvent *ev, uint16_t local_lid, uint32_t psn,
		       uint8_t out[PCAP_IB_PACKET_LEN])
{
	static const uint8_t zero_gid[GID_LEN];
	const struct rdmacm_mux_mad_addr *a = ev->hdr ? &ev->hdr->addr : NULL;
	const uint8_t *sgid = ev->rx ? ev->remote_gid : ev->local_gid;
	const uint8_t *dgid = ev->rx ? ev->local_gid : ev->remote_gid;
	uint16_t remote_lid = a ? ntohs(a->lid) : 0;
	uint8_t *lrh = out, *grh = lrh + PCAP_IB_LRH_LEN, *bth = grh + PCAP_IB_GRH_LEN;
	uint8_t *deth = bth + PCAP_IB_BTH_LEN, *mad = deth + PCAP_IB_DETH_LEN;
	size_t mad_len = ev->mad_len < 256 ? ev->mad_len : 256;
	uint32_t flow = a ? ntohl(a->flow_label) & 0xfffff : 0;
	uint8_t tclass = a ? a->traffic_class : 0;

	memset(out, 0, PCAP_IB_PACKET_LEN);

	/* LRH: VL 0, LVer 0; SL; LNH = GRH; DLID; PktLen in 4-byte words
	 * from the LRH up to the VCRC; SLID. */
	lrh[1] = (uint8_t)(((a ? a->sl : 0) & 0xf) << 4 | IB_LNH_GRH);
	put_be16(lrh + 2, ev->rx ? local_lid : remote_lid);
	put_be16(lrh + 4, (PCAP_IB_PACKET_LEN - 2) / 4);
	put_be16(lrh + 6, ev->rx ? remote_lid : local_lid);

	/* GRH: IPVer 6, TClass, FlowLabel; PayLen from the BTH through the
	 * ICRC; NxtHdr 0x1B (IBA transport); HopLmt; SGID; DGID. */
	put_be32(grh, 6u << 28 | (uint32_t)tclass << 20 | flow);
	put_be16(grh + 4, PCAP_IB_BTH_LEN + PCAP_IB_DETH_LEN + 256 + 4);
	grh[6] = IB_NEXT_HEADER_BTH;
	grh[7] = a && a->hop_limit ? a->hop_limit : IB_DEFAULT_HOP_LIMIT;
	memcpy(grh + 8, sgid ? sgid : zero_gid, GID_LEN);
	memcpy(grh + 24, dgid ? dgid : zero_gid, GID_LEN);

	/* BTH: UD SEND-only, no pad, TVer 0, P_Key, DestQP 1, PSN. */
	bth[0] = IB_OPCODE_UD_SEND_ONLY;
	put_be16(bth + 2, IB_DEFAULT_PKEY);
	put_be32(bth + 4, 1);
	put_be32(bth + 8, psn & 0xffffff);

	/* DETH: Q_Key of QP1, source QP 1. */
	put_be32(deth, CM_QP1_QKEY);
	put_be32(deth + 4, 1);

	if (ev->mad && mad_len)
		memcpy(mad, ev->mad, mad_len);

	pcap_put_le32(mad + 256, pcap_ib_icrc(out, PCAP_IB_PACKET_LEN - 6));
	uint16_t vcrc = pcap_ib_vcrc(out, PCAP_IB_PACKET_LEN - 2);
	out[PCAP_IB_PACKET_LEN - 2] = (uint8_t)vcrc;
	out[PCAP_IB_PACKET_LEN - 1] = (uint8_t)(vcrc >> 8);
	return PCAP_IB_PACKET_LEN;
}

int pcap_writer_open(const char *path, uint16_t local_lid, PcapWriter **ret)
{
	/* Classic pcap, in our byte order (readers detect it by the magic). */
	struct {
		uint32_t magic;
		uint16_t major, minor;
		int32_t thiszone;
		uint32_t sigfigs, snaplen, linktype;
	} hdr = { 0xa1b2c3d4u, 2, 4, 0, 0, 65535, PCAP_LINKTYPE_ERF };
	_cleanup_fd_ int fd = -1;
	PcapWriter *w;
	int r;

	/* Only root reads it: it holds every VM's CM traffic. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0600);
	if (fd < 0)
		return -errno;
	r = fd_write_all(fd, &hdr, sizeof(hdr), -1);
	if (r < 0)
		return r;
	w = g_new0(PcapWriter, 1);
	w->path = g_strdup(path);
	w->fd = fd_steal(&fd);
	w->local_lid = local_lid;
	w->size = (off_t)sizeof(hdr);
	*ret = w;
	return 0;
}

void pcap_writer_free(PcapWriter *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	g_free(w->path);
	g_free(w);
}

int pcap_writer_write(PcapWriter *w, const RelayEvent *ev)
{
	/* pcap record header (our byte order), ERF header, packet */
	uint8_t rec[16 + PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN];
	uint8_t *erf = rec + 16;
	uint64_t sec = ev->realtime_usec / 1000000u, usec = ev->realtime_usec % 1000000u;
	/* ERF time: seconds in the high 32 bits, binary fraction below. */
	uint64_t erf_ts = sec << 32 | ((usec << 32) / 1000000u);
	uint32_t rec_hdr[4] = { (uint32_t)sec, (uint32_t)usec, PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN,
				PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN };
	int r;

	if (w->disabled || ev->drop || !ev->mad || ev->mad_len == 0)
		return 0;

	memcpy(rec, rec_hdr, sizeof(rec_hdr));
	for (int i = 0; i < 8; i++)
		erf[i] = (uint8_t)(erf_ts >> (8 * i)); /* little-endian */
	erf[8] = PCAP_ERF_TYPE_INFINIBAND;
	erf[9] = 0; /* flags: interface 0, not truncated */
	put_be16(erf + 10, PCAP_ERF_HDR_LEN + PCAP_IB_PACKET_LEN);
	put_be16(erf + 12, 0); /* loss counter */
	put_be16(erf + 14, PCAP_IB_PACKET_LEN);
	pcap_ib_packet_build(ev, w->local_lid, w->psn++, erf + PCAP_ERF_HDR_LEN);

	r = fd_write_all(w->fd, rec, sizeof(rec), -1);
	if (r < 0) {
		/* Cut a partly written record off (disk full), so the file
		 * stays readable to its end. */
		if (ftruncate(w->fd, w->size) < 0) {
			/* Nothing more to do; the write error is the one to report. */
		}
		w->disabled = true;
		return r;
	}
	w->size += (off_t)sizeof(rec);
	w->packets++;
	return 1;
}

void pcap_writer_sink(void *userdata, const RelayEvent *ev)
{
	PcapWriter *w = userdata;
	int r = pcap_writer_write(w, ev);

	if (r < 0)
		log_error("cannot write to %s: %s; --trace-pcap stops here, relaying goes on",
			  w->path, strerror(-r));
}

uint64_t pcap_writer_packets(const PcapWriter *w)
{
	return w->packets;
}

bool pcap_writer_disabled(const PcapWriter *w)
{
	return w->disabled;
}
