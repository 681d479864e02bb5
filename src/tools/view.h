/* The device view of `softrdma run` (view.c): softrdma's devices as the kernel exposes RDMA
 * devices, for programs that look for them in sysfs and /dev rather than (only) through verbs
 * (UCX, pyverbs' tests, libibumad, hwloc):
 *
 *   /sys/class/infiniband/<dev>/{node_type,node_guid,sys_image_guid,node_desc,fw_ver}
 *   /sys/class/infiniband/<dev>/ports/1/{state,phys_state,link_layer,rate,lid,lid_mask_count,
 *                                        sm_lid,sm_sl,cap_mask}
 *   /sys/class/infiniband/<dev>/ports/1/gids/<i>, gid_attrs/types/<i>, gid_attrs/ndevs/<i>,
 *                                        pkeys/0
 *   /sys/class/infiniband/<dev>/device/net/<netdev>  (-> /sys/class/net/<netdev>)
 *   /sys/class/infiniband_verbs/abi_version, uverbs<n>/{ibdev,abi_version,dev,device}
 *   /dev/infiniband/uverbs<n>                        (a character device: /dev/null's)
 *
 * with the contents and formats of Linux's drivers/infiniband/core/sysfs.c, and n the device's
 * position in ibv_get_device_list(). The library (src/api/device.c) finds its uverbs<n> by the
 * ibdev file and reports dev_name, dev_path and ibdev_path to match.
 *
 * How: sysfs has no mkdir and /sys/class/infiniband may not exist (no ib_core), so a tmpfs is
 * mounted over /sys/class and one over /dev, each holding bind mounts of every entry it hides
 * (but the host's own infiniband entries) next to ours; that happens in a private mount
 * namespace, and without root in a new user namespace too, which maps the caller's uid and gid
 * to themselves (the program sees its own ids; everything else's owner shows as nobody).
 * An unprivileged user namespace cannot mknod, but may bind an existing character device onto
 * a file: /dev/infiniband/uverbs<n> is /dev/null, to be stat()ed and access()ed (UCX), never
 * used: softrdma's libibverbs does not open it.
 *
 * A helper child builds the namespaces and the view; this process joins them only once all is
 * in place (setns), so that any failure (user namespaces disabled, a mount refused) leaves it
 * exactly as it was. */
#ifndef SOFTRDMA_TOOLS_VIEW_H
#define SOFTRDMA_TOOLS_VIEW_H

#include <stddef.h>

/* Moves the calling process into a new mount namespace (and, without root, user namespace)
 * holding the view of the devices softrdma offers now. Call it single-threaded (setns of a
 * user namespace requires it), before exec'ing the program. Returns 0 (in the view now),
 * -EEXIST (this process already sees a softrdma view: nothing done), or another negative
 * errno with a one-line reason in why (the process is unchanged). */
int view_enter(char *why, size_t len);

#endif
