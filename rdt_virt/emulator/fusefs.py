# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""mfusepy operations serving a :class:`~rdt_virt.emulator.tree.ResctrlTree`.

The mount uses the options libvirt needs to see a live resctrl (DESIGN.md
section 8): ``fsname=resctrl,subtype=resctrl`` (``fuse.resctrl`` in
``/proc/mounts``), ``direct_io`` so every ``read()``/``write()`` reaches us
and a write is one command as on kernfs, a zero entry timeout so that
directories appear and vanish immediately, ``allow_other`` and
``default_permissions`` so that the kernel checks the 0644/0444 modes.

With a zero entry timeout every name of a path is looked up again at each
use, and a lookup brings the node's attributes: a ``stat()`` of a path is
as fresh as ever. The one-second attribute timeout only spares the
GETATTR that the kernel would otherwise send for each directory a path
walk passes through, to check its permissions (half of the round trips
of an agent's start event); what it may show up to a second late is the
mount root's link count after a remount through the control socket, and
``fstat()`` of a file held open.

Locking is left to the kernel: an Operations class without ``flock``/``lock``
makes FUSE keep ``flock()`` locks locally, which is what libvirt's
``flock(LOCK_EX)`` on the mount root needs. (mfusepy would also treat an
attribute called ``lock`` as a handler, so none is defined.)

Reads follow ``seq_file``: the text is produced when a file is read at
offset 0 and later offsets continue from that text.

There is no ``flush`` handler: kernfs has none, and libfuse then answers
the first FLUSH with ENOSYS, after which the kernel sends none, so a
``close()`` costs no round trip to the daemon.
"""

import errno
import itertools
import os
import stat
import threading

import mfusepy
from oslo_log import log as logging

from rdt_virt.emulator import kparse
from rdt_virt.emulator import tree as tree_mod

LOG = logging.getLogger(__name__)

MOUNT_OPTIONS = {
    'fsname': 'resctrl',
    'subtype': 'resctrl',
    'direct_io': True,
    'attr_timeout': 1,          # seconds; see the module's docstring
    'entry_timeout': 0,
    'negative_timeout': 0,
    'allow_other': True,
    'default_permissions': True,
}


def _context():
    uid, gid, pid = mfusepy.fuse_get_context()
    return tree_mod.Context(uid, gid, pid)


def _fuse_errors(func):
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except kparse.KernelError as e:
            raise mfusepy.FuseOSError(e.errno) from None
    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


class ResctrlOperations(mfusepy.Operations):
    """FUSE callbacks; all semantics live in the tree and the model."""

    use_ns = True

    def __init__(self, tree, faults=None):
        self.tree = tree
        # Injected refusals (rdt_virt.emulator.faults), checked first.
        self.faults = faults
        self._fh = itertools.count(1)
        self._buffers = {}
        self._buf_lock = threading.Lock()

    def _inject(self, op, path, data=None):
        if self.faults is not None:
            self.faults.check(self.tree.model, op, path, data)

    @_fuse_errors
    def getattr(self, path, fh=None):
        attrs = self.tree.getattr(path)
        for key in ('st_atime', 'st_mtime', 'st_ctime'):
            attrs[key] = int(attrs[key] * 1e9)
        return attrs

    @_fuse_errors
    def readdir(self, path, fh):
        # With each entry's type, as kernfs gives it: listing groups then
        # costs no lookup per entry.
        return [('.', stat.S_IFDIR, 0), ('..', stat.S_IFDIR, 0)] + [
            (name, mode, 0) for name, mode in self.tree.readdir_modes(path)]

    @_fuse_errors
    def open(self, path, flags):
        writing = (flags & os.O_ACCMODE) != os.O_RDONLY
        self.tree.check_open(path, writing)
        return next(self._fh)

    @_fuse_errors
    def read(self, path, size, offset, fh):
        with self._buf_lock:
            data = self._buffers.get(fh)
        if offset == 0 or data is None:
            self._inject('read', path)
            data = self.tree.read(path).encode('latin-1')
            with self._buf_lock:
                self._buffers[fh] = data
        return data[offset:offset + size]

    @_fuse_errors
    def write(self, path, data, offset, fh):
        self._inject('write', path, data.decode('latin-1'))
        return self.tree.write(path, data, _context())

    def release(self, path, fh):
        with self._buf_lock:
            self._buffers.pop(fh, None)
        return 0

    def truncate(self, path, length, fh=None):
        # O_TRUNC on open; kernfs ignores the size too.
        return 0

    def utimens(self, path, times=None):
        return 0

    @_fuse_errors
    def mkdir(self, path, mode):
        self._inject('mkdir', path)
        self.tree.mkdir(path, mode, _context())
        return 0

    @_fuse_errors
    def rmdir(self, path):
        self._inject('rmdir', path)
        self.tree.rmdir(path)
        return 0

    @_fuse_errors
    def rename(self, old, new):
        self._inject('rename', old, new)
        self.tree.rename(old, new)
        return 0

    def create(self, path, mode, fi=None):
        # kernfs directories cannot hold new files.
        raise mfusepy.FuseOSError(errno.EACCES)

    def unlink(self, path):
        raise mfusepy.FuseOSError(errno.EPERM)

    def statfs(self, path):
        return {'f_bsize': 4096, 'f_frsize': 4096, 'f_namemax': 255}


def serve(tree, mountpoint, foreground=True, debug=False, faults=None):
    """Mount *tree* on *mountpoint* and serve until unmounted (blocks).

    libfuse unmounts on SIGTERM, SIGINT and SIGHUP; that is a normal stop.
    """
    try:
        mfusepy.FUSE(ResctrlOperations(tree, faults), mountpoint,
                     foreground=foreground, nothreads=False, debug=debug,
                     **MOUNT_OPTIONS)
    except RuntimeError as e:
        # fuse_main() returns 8 when a signal ended the loop.
        if e.args != (8,):
            raise
        LOG.info('Stopped by a signal; %s is unmounted', mountpoint)
