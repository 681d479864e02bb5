/* Classic pcap reader for tests (see pcap.h). The file format: a 24-byte global header
 * (magic 0xa1b2c3d4 for microsecond or 0xa1b23c4d for nanosecond timestamps, in the writer's
 * byte order), then per frame a 16-byte record header (ts_sec, ts_frac, caplen, origlen)
 * followed by caplen bytes. */
#include "pcap.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GLOBAL_HDR_LEN 24
#define RECORD_HDR_LEN 16
#define ETH_HDR_LEN    14
#define ETH_P_IP_      0x0800
#define ETH_P_IPV6_    0x86DD
#define ETH_P_8021Q_   0x8100

static uint32_t rd32(const struct pcap_file *f, const uint8_t *p)
{
	if (f->swapped)
		return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

int pcap_open(struct pcap_file *f, const char *path)
{
	FILE *fp;
	long sz;
	int err = -EINVAL;

	memset(f, 0, sizeof(*f));
	fp = fopen(path, "rb");
	if (!fp)
		return -errno;
	if (fseek(fp, 0, SEEK_END) != 0 || (sz = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
		err = -EIO;
		goto close_file;
	}
	if (sz < GLOBAL_HDR_LEN)
		goto close_file;
	f->data = malloc((size_t)sz);
	if (!f->data) {
		err = -ENOMEM;
		goto close_file;
	}
	f->len = (size_t)sz;
	if (fread(f->data, 1, f->len, fp) != f->len) {
		err = -EIO;
		goto free_data;
	}

	uint32_t magic_le = (uint32_t)f->data[0] | (uint32_t)f->data[1] << 8 |
			    (uint32_t)f->data[2] << 16 | (uint32_t)f->data[3] << 24;
	switch (magic_le) {
	case 0xa1b2c3d4:
		break;
	case 0xa1b23c4d:
		f->nsec = true;
		break;
	case 0xd4c3b2a1:
		f->swapped = true;
		break;
	case 0x4d3cb2a1:
		f->swapped = true;
		f->nsec = true;
		break;
	default:
		goto free_data;
	}
	f->linktype = rd32(f, f->data + 20);
	if (f->linktype != PCAP_LINKTYPE_ETHERNET)
		goto free_data;
	f->off = GLOBAL_HDR_LEN;
	fclose(fp);
	return 0;

free_data:
	free(f->data);
	f->data = NULL;
close_file:
	fclose(fp);
	return err;
}

void pcap_close(struct pcap_file *f)
{
	free(f->data);
	memset(f, 0, sizeof(*f));
}

void pcap_rewind(struct pcap_file *f)
{
	f->off = GLOBAL_HDR_LEN;
	f->index = 0;
}

int pcap_next(struct pcap_file *f, struct pcap_frame *fr)
{
	const uint8_t *h;
	uint32_t caplen;

	if (f->off == f->len)
		return 0;
	if (f->len - f->off < RECORD_HDR_LEN)
		return -EINVAL;
	h = f->data + f->off;
	caplen = rd32(f, h + 8);
	if (f->len - f->off - RECORD_HDR_LEN < caplen)
		return -EINVAL;
	fr->index = ++f->index;
	fr->ts_ns =
	    (uint64_t)rd32(f, h) * 1000000000u + (uint64_t)rd32(f, h + 4) * (f->nsec ? 1u : 1000u);
	fr->data = h + RECORD_HDR_LEN;
	fr->caplen = caplen;
	fr->origlen = rd32(f, h + 12);
	f->off += RECORD_HDR_LEN + caplen;
	return 1;
}

int pcap_ethertype(const struct pcap_frame *fr, size_t *l3_off)
{
	size_t off = 12;
	uint16_t et;

	if (fr->caplen < ETH_HDR_LEN)
		return -1;
	et = be16(fr->data + off);
	off += 2;
	if (et == ETH_P_8021Q_) {
		if (fr->caplen < ETH_HDR_LEN + 4)
			return -1;
		et = be16(fr->data + off + 2);
		off += 4;
	}
	*l3_off = off;
	return et;
}

int pcap_roce(const struct pcap_frame *fr, uint16_t dport, struct pcap_roce *out)
{
	size_t off, avail, ihl, ip_len;
	const uint8_t *ip;
	int et = pcap_ethertype(fr, &off);

	if (!dport)
		dport = 4791;
	if (et < 0)
		return 0;
	ip = fr->data + off;
	avail = fr->caplen - off;
	memset(out, 0, sizeof(*out));
	if (et == ETH_P_IP_) {
		if (avail < 20 || (ip[0] >> 4) != 4)
			return 0;
		ihl = (size_t)(ip[0] & 0x0F) * 4;
		ip_len = be16(ip + 2);
		/* Fragments (MF or offset) are not whole datagrams. */
		if (ihl < 20 || ip[9] != 17 || (be16(ip + 6) & 0x3FFF) != 0)
			return 0;
	} else if (et == ETH_P_IPV6_) {
		if (avail < 40 || (ip[0] >> 4) != 6)
			return 0;
		ihl = 40;
		ip_len = 40 + (size_t)be16(ip + 4);
		out->ipv6 = true;
		if (ip[6] != 17) /* no extension headers in RoCEv2 */
			return 0;
	} else {
		return 0;
	}
	if (ip_len > avail || ip_len < ihl + 8)
		return 0;
	const uint8_t *udp = ip + ihl;
	size_t udp_len = be16(udp + 4);
	if (be16(udp + 2) != dport || udp_len < 8 || udp_len > ip_len - ihl)
		return 0;
	out->ip = ip;
	out->ip_len = ihl + udp_len;
	out->udp = udp;
	out->sport = be16(udp);
	out->dport = be16(udp + 2);
	out->payload = udp + 8;
	out->payload_len = udp_len - 8;
	return 1;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(a, b);
}

int pcap_glob(const char *dir, char (*paths)[PCAP_PATH_MAX], int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l < 6 || strcmp(de->d_name + l - 5, ".pcap") != 0)
			continue;
		if (n < max)
			snprintf(paths[n], PCAP_PATH_MAX, "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	qsort(paths, (size_t)(n < max ? n : max), PCAP_PATH_MAX, cmp_path);
	return n;
}
