/* SPDX-License-Identifier: MIT */
/*
 * --trace-pcap: every MAD the daemon relayed, as a capture file that
 * Wireshark and tshark decode as InfiniBand CM.
 *
 * Each relayed MAD (TX sent to the wire, RX delivered to a client) becomes
 * one synthesized InfiniBand packet: LRH (LNH = GRH present), GRH (SGID and
 * DGID in the direction the MAD travelled), BTH (UD SEND-only, P_Key
 * 0xffff, destination QP 1, a running PSN), DETH (Q_Key 0x80010000, source
 * QP 1), the 256-byte MAD as it was on the wire (daemon comm ids, not the
 * client's), ICRC and VCRC. The CRCs are computed as IBA vol. 1 7.8 says
 * (Wireshark 4.0 shows them but does not check them).
 *
 * Refused and dropped MADs are not written: the file shows the conversation
 * the fabric saw through this daemon, and every refusal and drop is in the
 * counters and in --trace / `rdmacm-muxctl trace` with its reason. An RX
 * MAD that was dropped has no client and often no known destination GID,
 * so a faithful GRH could not be built for it anyway.
 *
 * File format: classic pcap with LINKTYPE_ERF (197), each packet wrapped in
 * an ERF record of type 21 (INFINIBAND). LINKTYPE_INFINIBAND (247) would
 * be the natural choice, but Debian 12's tshark 4.0 refuses it ("network
 * type 247 unknown or unsupported"), while ERF type 21 reaches the same
 * InfiniBand dissector in every Wireshark since 1.x.
 *
 * Every packet is written with one write(2), so a daemon killed at any
 * point leaves a file that ends on a whole record. A write error disables
 * the writer with one log line; relaying goes on.
 */
#ifndef RDMACM_MUX_PCAP_WRITER_H
#define RDMACM_MUX_PCAP_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relay.h"

#define PCAP_LINKTYPE_ERF 197
#define PCAP_ERF_TYPE_INFINIBAND 21
#define PCAP_ERF_HDR_LEN 16

#define PCAP_IB_LRH_LEN 8
#define PCAP_IB_GRH_LEN 40
#define PCAP_IB_BTH_LEN 12
#define PCAP_IB_DETH_LEN 8
/* LRH + GRH + BTH + DETH + MAD + ICRC + VCRC */
#define PCAP_IB_PACKET_LEN (PCAP_IB_LRH_LEN + PCAP_IB_GRH_LEN + PCAP_IB_BTH_LEN + PCAP_IB_DETH_LEN + 256 + 4 + 2)

typedef struct PcapWriter PcapWriter;

/**
 * pcap_writer_open() - create (or truncate) @path and write the file header.
 * @local_lid: this port's LID (0 on RoCE), for the LRH
 *
 * Return: 0 or a negative errno (the caller logs it).
 */
int pcap_writer_open(const char *path, uint16_t local_lid, PcapWriter **ret);
void pcap_writer_free(PcapWriter *w);

/**
 * pcap_writer_write() - append @ev as one packet.
 *
 * Return: 1 when written; 0 when @ev is not written by design (refused or
 * dropped, no MAD) or the writer is disabled; a negative errno when the
 * write failed, after which the writer is disabled.
 */
int pcap_writer_write(PcapWriter *w, const RelayEvent *ev);

/* A RelayEventFn: pcap_writer_write(), logging the one failure. */
void pcap_writer_sink(void *userdata, const RelayEvent *ev);

uint64_t pcap_writer_packets(const PcapWriter *w);
bool pcap_writer_disabled(const PcapWriter *w);

/**
 * pcap_ib_packet_build() - synthesize the InfiniBand packet of a relayed MAD.
 * @out: PCAP_IB_PACKET_LEN bytes
 *
 * Return: PCAP_IB_PACKET_LEN.
 */
size_t pcap_ib_packet_build(const RelayEvent *ev, uint16_t local_lid, uint32_t psn,
		       uint8_t out[PCAP_IB_PACKET_LEN]);

/* ICRC of a packet that starts with an LRH and a GRH (@len bytes, up to
 * but excluding the ICRC), variant fields masked as IBA 7.8.1 says. */
uint32_t pcap_ib_icrc(const uint8_t *pkt, size_t len);
/* VCRC over @len bytes (LRH up to and including the ICRC). */
uint16_t pcap_ib_vcrc(const uint8_t *pkt, size_t len);

#endif /* RDMACM_MUX_PCAP_WRITER_H */
