// Whether anything on the storage node has a file open for writing: a descriptor opened for
// writing (a local process, or this server for another client's handle), or a shared writable
// mapping, which holds its file open for writing after its descriptor is closed.
// Why: a file's change time moves with every write() and truncate, but not with every change
// of its data: stores through a shared mapping set it at the first write fault after write-back
// on ext4 and xfs, never on tmpfs, and one write() copying for longer than the change time's
// tick leaves it as it was at the call. While anything has the file open for writing, its
// change time can therefore not tell that the data is as it was (KeptPages, open attrs).
// How: a read lease (fcntl F_SETLEASE F_RDLCK) is refused while the file is open for writing
// anywhere, and is released again at once (two system calls). knfsd's delegations and Samba's
// oplocks rest on the same leases. While the lease is held (microseconds), an open for writing
// of the file waits for its release, or fails with EWOULDBLOCK when opened O_NONBLOCK (this
// server never opens O_NONBLOCK: Reopen; knfsd does, and answers NFS3ERR_JUKEBOX or
// NFS4ERR_DELAY, so its client retries); the break signal (SIGIO) is ignored process-wide.
// Only OPENs of clients that asked for open attrs (mount option kept_pages) take the lease, and
// only for a file whose change time has settled (AppendOpenRecord).
// A lease sees the writers of this host's inode only: a writer on another host of a shared
// filesystem under the export (CephFS, NFS) is not seen (such filesystems mostly refuse leases,
// and then no open gets a record).
#pragma once

namespace ringfs::server {

// `read_only_fd`: the file, opened O_RDONLY by this process. True also when the answer is not
// known (leases not supported by the filesystem or disabled by fs.leases-enable).
bool OpenForWriting(int read_only_fd);

}  // namespace ringfs::server
