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

"""All resctrl filesystem I/O, behind one class rooted at a configurable path.

Layout (Documentation/filesystems/resctrl.rst)::

    <root>/                       the default control group
        schemata tasks cpus cpus_list mode size
        info/<RES>/...            capabilities; info/last_cmd_status
        mon_data/mon_L3_XX/       llc_occupancy mbm_total_bytes
                                  mbm_local_bytes (cumulative)
        mon_groups/<mon>/         monitoring groups of the default group
        <group>/                  a control group (one CLOSID), same files
            mon_groups/<mon>/     its monitoring groups (one RMID each)

Semantics the callers rely on:

* A write the kernel refuses fails with EINVAL (or another errno) and
  leaves the reason in ``info/last_cmd_status``; every error raised here
  carries that text.
* Writing a thread id into ``tasks`` moves the thread out of its old
  control and monitoring groups. A monitoring group accepts only threads
  of its parent control group. A thread that has exited gives ESRCH,
  which is not an error here: the caller is told it is gone.
* mkdir fails with ENOSPC when CLOSIDs or RMIDs run out and with EBUSY
  when the free RMIDs still sit in limbo; rmdir gives the group's threads
  and CPUs back to the parent.
* ``mon_data`` counters are cumulative and read ``Unavailable``, ``Error``
  or ``Unassigned`` when there is no value.
* Multi-step changes are made under ``flock(LOCK_EX)`` on the root
  directory, the lock libvirt takes too.
"""

import collections
import contextlib
import errno
import fcntl
import os
import re
import threading

from rdt_virt import concurrency
from rdt_virt import exception
from rdt_virt.resctrl import info as info_mod
from rdt_virt.resctrl import schemata as schemata_mod

RESERVED_NAMES = frozenset(('info', 'mon_groups', 'mon_data'))
# Files in a group's directory: a group of that name would be a file.
GROUP_FILES = frozenset(('tasks', 'cpus', 'cpus_list', 'schemata', 'size',
                         'mode', 'mon_hw_id', 'mba_MBps_event',
                         'mbm_L3_assignments'))
ASSIGNMENTS = 'mbm_L3_assignments'
# Counter assignment states: exclusive counter, none.
ASSIGNED = 'e'
UNASSIGNED = '_'
SENTINELS = ('Unavailable', 'Error', 'Unassigned')
_MON_DIR = re.compile(r'^mon_L3_(\d+)$')
# Package telemetry domains (Intel AET, 7.0): one per processor package.
_PKG_DIR = re.compile(r'^mon_PERF_PKG_(\d+)$')
_NAME = re.compile(r'[A-Za-z0-9_.:+@-]{1,255}')
# Bytes asked for by each read of a group file: a tasks file of a few
# thousand threads in one.
_READ_SIZE = 65536

MonValue = collections.namedtuple('MonValue', ['value', 'reason'])
MonValue.__doc__ = """A monitoring counter: ``value`` in bytes, or None with
the kernel's ``reason`` (``Unavailable``, ``Error``, ``Unassigned``)."""


def validate_group_name(name):
    """Raise InvalidGroupName unless ``name`` is a safe resctrl group name.

    Names become directory names under the resctrl root: no path
    separators, no dot names, none of the kernel's reserved directory or
    file names.
    """
    # fullmatch: with match() and '$' a trailing newline would slip through.
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise exception.InvalidGroupName(
            name=name, reason='use 1-255 characters of A-Z a-z 0-9 _ . : + '
                              '@ -')
    if (name in ('.', '..') or name in RESERVED_NAMES or
            name in GROUP_FILES):
        raise exception.InvalidGroupName(name=name, reason='reserved name')


# Above any kernel's NR_CPUS (8192 on x86): a list naming more is garbage,
# and expanding it could take all memory.
MAX_CPUS = 65536


def parse_cpu_list(text):
    """Parse ``0-3,8`` into a set of CPU numbers.

    :raises: ValueError for anything else, including CPU numbers of
        :data:`MAX_CPUS` or more and ranges that run backwards.
    """
    cpus = set()
    for part in text.strip().split(','):
        if not part:
            continue
        first, _sep, last = part.partition('-')
        first, last = _cpu(first), _cpu(last or first)
        if last < first:
            raise ValueError('CPU range %r runs backwards' % part)
        cpus.update(range(first, last + 1))
    return cpus


def _cpu(text):
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 5 or (
            int(text) >= MAX_CPUS):
        raise ValueError('invalid CPU number %r' % text)
    return int(text)


def parse_tasks(text):
    """Thread ids of a ``tasks`` file, one per line.

    :raises: ValueError for anything but positive decimal thread ids.
    """
    words = text.split()
    if not words:
        return []
    joined = ''.join(words)
    if joined.isascii() and joined.isdigit() and max(map(len, words)) <= 10:
        # The common case at once; the loop below only names the culprit.
        return list(map(int, words))
    for word in words:
        if not word.isascii() or not word.isdigit() or len(word) > 10:
            raise ValueError('invalid thread id %r' % word[:20])
    return list(map(int, words))


def parse_mount_options(mountinfo, root):
    """Options of the mount at ``root`` in ``/proc/self/mountinfo`` text.

    Both the per-mount and the superblock options (``cdp``, ``mba_MBps``,
    ...); the last mount on ``root`` counts (later lines are mounts
    stacked on top). Lines that are not mountinfo lines are skipped.
    """
    options = frozenset()
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 10 or '-' not in fields[6:]:
            continue
        if _unescape_mountinfo(fields[4]) != root:
            continue
        sep = fields.index('-', 6)
        if len(fields) < sep + 4:
            continue
        options = frozenset(fields[5].split(',') +
                            fields[sep + 3].split(','))
    return options


def format_cpu_list(cpus):
    """Format CPU numbers as ``0-3,8``."""
    ranges = []
    for cpu in sorted(cpus):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join('%d' % a if a == b else '%d-%d' % (a, b)
                    for a, b in ranges)


def parse_mon_value(text):
    """Parse a ``mon_data`` file into a :data:`MonValue`."""
    text = text.strip()
    if text in SENTINELS:
        return MonValue(None, text)
    # An unsigned 64-bit decimal: int() alone would also take signs,
    # underscores and non-ASCII digits.
    if text.isascii() and text.isdigit() and len(text) <= 20:
        return MonValue(int(text), None)
    return MonValue(None, 'unparsable %r' % text[:40])


# A sentinel as the kernel prints it, and its value (MonValue is a tuple).
_SENTINEL_LINES = {('%s\n' % s).encode(): MonValue(None, s)
                   for s in SENTINELS}


def parse_mon_bytes(data):
    """:func:`parse_mon_value` of a counter file's bytes, as read.

    A sample parses a thousand counters: a decimal or a sentinel and its
    newline, the common cases, are taken without decoding the text.
    """
    digits = data[:-1] if data.endswith(b'\n') else data
    # bytes.isdigit() takes ASCII digits only, as the text check does.
    if digits.isdigit() and len(digits) <= 20:
        return MonValue(int(digits), None)
    return _SENTINEL_LINES.get(data) or parse_mon_value(data.decode())


def _subdirs(path):
    """Sorted names of the directories in ``path``.

    From the directory entries' types, so a listing is one call: resctrl
    (kernfs) fills them in, where a stat per entry would cost a lookup.
    """
    with os.scandir(path) as entries:
        return sorted(e.name for e in entries if e.is_dir())


def _read_text(path):
    """The text of a file, as open(path).read() gives it (UTF-8).

    os.open/os.read: the agent reads resctrl's small files every tick,
    and a text file object costs several times the read itself.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, _READ_SIZE)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    text = b''.join(chunks).decode()
    if '\r' in text:
        # open()'s universal newlines; resctrl itself writes none.
        text = text.replace('\r\n', '\n').replace('\r', '\n')
    return text


def _unescape_mountinfo(field):
    return re.sub(r'\\([0-7]{3})', lambda m: chr(int(m.group(1), 8)), field)


class Resctrl(object):
    """The resctrl filesystem mounted at ``root``.

    :param root: mount point, normally ``/sys/fs/resctrl`` (``[rdt]
        resctrl_root``).
    :param prefix: name prefix of the groups rdt-virt owns (``[rdt]
        group_prefix``).
    :param mountinfo: where to read mounts from, for the mount options.
    :param osrelease: where to read the kernel release from (``[rdt]
        kernel_release_file``), for the limits no resctrl file shows
        (:mod:`~rdt_virt.resctrl.release`).
    """

    def __init__(self, root='/sys/fs/resctrl', prefix='rdtvirt-',
                 mountinfo='/proc/self/mountinfo',
                 osrelease='/proc/sys/kernel/osrelease'):
        self.root = os.path.abspath(root)
        self.prefix = prefix
        self._mountinfo = mountinfo
        self._osrelease = osrelease
        self._lock = threading.RLock()
        self._lock_depth = 0
        self._lock_fd = None
        # (group, mon_group, *parts) -> path: the agent reads the same
        # files every tick, and a name valid once stays valid.
        self._paths = {}
        # ((mountinfo text, root), options) of the last mount_options().
        self._mounted = (None, None)

    # Paths -----------------------------------------------------------------

    def path(self, group=None, mon_group=None, *parts):
        """Absolute path of a group's directory or of a file within it.

        ``group=None`` is the default group; ``mon_group`` selects one of
        the group's monitoring groups. Names are validated, so the result
        always lies below the root.
        """
        key = (group, mon_group) + parts
        try:
            return self._paths[key]
        except (KeyError, TypeError):     # TypeError: not a name at all
            pass
        found = self._path(group, mon_group, *parts)
        if len(self._paths) >= 16384:
            self._paths.clear()
        self._paths[key] = found
        return found

    def _path(self, group, mon_group, *parts):
        elems = [self.root]
        if group is not None:
            validate_group_name(group)
            elems.append(group)
        if mon_group is not None:
            validate_group_name(mon_group)
            elems += ['mon_groups', mon_group]
        return os.path.join(*(elems + list(parts)))

    def owns(self, name):
        """True if rdt-virt owns the group ``name`` by its prefix."""
        return name.startswith(self.prefix)

    # Low-level I/O ---------------------------------------------------------

    def _read(self, path):
        try:
            return _read_text(path)
        except FileNotFoundError:
            self._missing(path)
        except OSError as e:
            raise exception.ResctrlError(path=path,
                                         reason=os.strerror(e.errno))

    def _missing(self, path):
        """Raise the error that explains why ``path`` does not exist.

        Not mounted, a control or monitoring group that does not exist, or
        a file this kernel or host does not have (``mon_data`` without
        monitoring, ``size`` on old kernels).
        """
        if not self.is_mounted():
            raise exception.ResctrlNotMounted(path=self.root)
        rest = os.path.relpath(path, self.root).split(os.sep)
        base = self.root
        if len(rest) > 1 and rest[0] not in RESERVED_NAMES:
            group, rest = rest[0], rest[1:]
            base = os.path.join(self.root, group)
            if not os.path.isdir(base):
                raise exception.GroupNotFound(path=path, group=group)
        if rest[0] in ('mon_groups', 'mon_data'):
            if not os.path.isdir(os.path.join(base, rest[0])):
                raise exception.ResctrlError(
                    path=path, reason='monitoring is not available')
            if rest[0] == 'mon_groups' and len(rest) > 2:
                mon_dir = os.path.join(base, 'mon_groups', rest[1])
                if not os.path.isdir(mon_dir):
                    raise exception.GroupNotFound(
                        path=path,
                        group=os.path.relpath(mon_dir, self.root))
        raise exception.ResctrlError(path=path, reason='no such file')

    def last_cmd_status(self):
        """The text of ``info/last_cmd_status`` (the kernel's last verdict)."""
        try:
            with open(os.path.join(self.root, 'info',
                                   'last_cmd_status')) as f:
                return f.read().strip()
        except OSError as e:
            return 'last_cmd_status unreadable: %s' % e.strerror

    def failure_status(self, err):
        """What explains a failed operation with errno *err*.

        The text of ``info/last_cmd_status``, unless it says ``ok`` or
        nothing: the kernel wrote no text for this error, or another
        reader cleared it between the failure and this read (kernels
        that clear the status at every group file access make that
        likely). Then the errno's meaning stands in; never ``ok``.
        """
        status = self.last_cmd_status()
        if status in ('', 'ok') or status.startswith(
                'last_cmd_status unreadable'):
            meaning = os.strerror(err) if err else 'unknown error'
            return '%s (info/last_cmd_status: %s)' % (
                meaning, status or 'empty')
        return status

    @contextlib.contextmanager
    def _at(self, path):
        """``(directory fd, name)`` that a change to ``path`` goes through.

        Here ``(None, path)``: changes are made by path. The privileged
        entrypoints' Resctrl walks to the directory and checks it first,
        and changes what it checked (:mod:`rdt_virt.privsep.resctrl`).
        """
        yield None, path

    def _open_for_write(self, path, data):
        # O_TRUNC is what echo(1) and libvirt use; the kernel ignores it,
        # and a plain file (a test tree) then holds exactly what was written.
        try:
            with self._at(path) as (fd, name):
                return os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC,
                               dir_fd=fd)
        except FileNotFoundError:
            self._missing(path)
        except OSError as e:
            raise exception.ResctrlWriteError(
                path, data, e.errno, os.strerror(e.errno),
                self.failure_status(e.errno))

    def _write(self, path, data):
        """Write ``data`` in one write(2); errors carry last_cmd_status."""
        fd = self._open_for_write(path, data)
        try:
            os.write(fd, data.encode())
        except OSError as e:
            raise exception.ResctrlWriteError(
                path, data, e.errno, os.strerror(e.errno),
                self.failure_status(e.errno))
        finally:
            os.close(fd)

    # Mount and capabilities ------------------------------------------------

    def is_mounted(self):
        """True if a resctrl filesystem is visible at the root."""
        return (os.path.isdir(os.path.join(self.root, 'info')) and
                os.path.isfile(os.path.join(self.root, 'schemata')))

    def mount_options(self):
        """Options of the mount at the root (``cdp``, ``mba_MBps``, ...).

        Empty when the root is not a mount point (a fixture tree).
        """
        try:
            with open(self._mountinfo) as f:
                text = f.read()
        except OSError:
            return frozenset()
        # Read at every tick (a remount changes them): parsed once.
        key = (text, os.path.realpath(self.root))
        if self._mounted[0] != key:
            self._mounted = (key, parse_mount_options(*key))
        return self._mounted[1]

    def kernel_release(self):
        """The running kernel's release text, or None when unreadable."""
        try:
            with open(self._osrelease) as f:
                return f.read().strip() or None
        except (OSError, TypeError):
            return None

    def io_alloc_states(self):
        """``((resource, text), ...)`` of every ``info/*/io_alloc`` file.

        Writable at run time (6.19+): enabling it takes a CLOSID without
        changing anything else under ``info/``.
        """
        base = os.path.join(self.root, 'info')
        found = []
        for res in sorted(os.listdir(base)):
            try:
                with open(os.path.join(base, res, 'io_alloc')) as f:
                    found.append((res, f.read().strip()))
            except OSError:
                continue
        return tuple(found)

    def read_info(self):
        """``{'L3/cbm_mask': '7ff', ...}`` for every file under ``info/``."""
        base = os.path.join(self.root, 'info')
        if not os.path.isdir(base):
            raise exception.ResctrlNotMounted(path=self.root)
        files = {}
        for res in sorted(os.listdir(base)):
            res_dir = os.path.join(base, res)
            if not os.path.isdir(res_dir):
                continue
            for name in sorted(os.listdir(res_dir)):
                try:
                    with open(os.path.join(res_dir, name)) as f:
                        files['%s/%s' % (res, name)] = f.read().strip()
                except OSError:
                    # Some info entries are directories (event_configs),
                    # write-only or need privileges; none is needed here.
                    continue
        return files

    def mon_domain_ids(self, group=None, mon_group=None):
        """Ids of the L3 monitoring domains under ``mon_data``."""
        base = self.path(group, mon_group, 'mon_data')
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_MON_DIR.match, names)
                      if m)

    def pkg_domain_ids(self, group=None, mon_group=None):
        """Ids of the ``mon_data/mon_PERF_PKG_XX`` package domains."""
        base = self.path(group, mon_group, 'mon_data')
        try:
            names = os.listdir(base)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_PKG_DIR.match, names)
                      if m)

    def capabilities(self):
        """Read the host's :class:`~rdt_virt.resctrl.info.HostCapabilities`.

        :raises: ResctrlNotMounted when nothing is mounted at the root,
            which is also what a host without RDT looks like: the caller
            decides whether that means "no RDT" or "misconfigured".
        """
        files = self.read_info()
        root_size = ''
        if os.path.exists(self.path(None, None, 'size')):
            root_size = self._read(self.path(None, None, 'size'))
        return info_mod.parse(
            files,
            root_schemata=self._read(self.path(None, None, 'schemata')),
            root_size=root_size,
            mount_options=self.mount_options(),
            mon_domain_ids=(self.mon_domain_ids()
                            if 'L3_MON/num_rmids' in files else ()),
            kernel_release=self.kernel_release(),
            pkg_domain_ids=(self.pkg_domain_ids()
                            if 'PERF_PKG_MON/num_rmids' in files else ()))

    # Groups ----------------------------------------------------------------

    def list_groups(self):
        """Names of the control groups, the default group excluded."""
        if not self.is_mounted():
            raise exception.ResctrlNotMounted(path=self.root)
        return [name for name in _subdirs(self.root)
                if name not in RESERVED_NAMES]

    def list_mon_groups(self, group=None):
        """Names of the monitoring groups of ``group`` (None: default)."""
        base = self.path(group, None, 'mon_groups')
        try:
            return _subdirs(base)
        except FileNotFoundError:
            self._missing(base)

    def _check_owned(self, name, foreign_ok):
        if not foreign_ok and not self.owns(name):
            raise exception.NotOwned(group=name, prefix=self.prefix)

    def _mkdir(self, path, name, what):
        try:
            with self._at(path) as (fd, leaf):
                os.mkdir(leaf, dir_fd=fd)
        except FileExistsError:
            raise exception.GroupExists(path=path, group=name,
                                        reason='exists')
        except OSError as e:
            status = self.failure_status(e.errno)
            if e.errno == errno.ENOSPC:
                raise exception.NoSpace(path=path, group=name, what=what,
                                        status=status)
            if e.errno == errno.EBUSY:
                raise exception.RMIDBusy(path=path, group=name,
                                         status=status)
            if e.errno == errno.ENOENT:
                # The parent is missing: a control group, or mon_groups on
                # a host that cannot monitor.
                self._missing(os.path.join(path, 'tasks'))
            raise exception.ResctrlError(
                path=path, reason='%s: %s' % (os.strerror(e.errno), status))

    def _rmdir(self, path):
        try:
            with self._at(path) as (fd, leaf):
                os.rmdir(leaf, dir_fd=fd)
        except FileNotFoundError:
            self._missing(os.path.join(path, 'tasks'))
        except OSError as e:
            raise exception.ResctrlError(
                path=path, reason='%s: %s' % (os.strerror(e.errno),
                                              self.failure_status(e.errno)))

    def create_group(self, name, foreign_ok=False):
        """Create control group ``name`` (takes a CLOSID and an RMID).

        :param foreign_ok: allow a name without rdt-virt's prefix (used to
            restore the groups of libvirt domains after a remount).
        :raises: NoSpace (out of CLOSIDs or RMIDs), GroupExists, NotOwned.
        """
        self._check_owned(name, foreign_ok)
        self._mkdir(self.path(name), name, 'CLOSID or RMID')

    def remove_group(self, name, foreign_ok=False):
        """Remove control group ``name``; its threads return to the root."""
        self._check_owned(name, foreign_ok)
        self._rmdir(self.path(name))

    def create_mon_group(self, name, group=None, foreign_ok=False):
        """Create monitoring group ``name`` under ``group``.

        :raises: NoSpace (no free RMID), RMIDBusy (RMIDs in limbo).
        """
        self._check_owned(name, foreign_ok)
        self._mkdir(self.path(group, name), name, 'RMID')

    def remove_mon_group(self, name, group=None, foreign_ok=False):
        """Remove a monitoring group; its threads return to ``group``."""
        self._check_owned(name, foreign_ok)
        self._rmdir(self.path(group, name))

    def move_mon_group(self, name, group, new_group, foreign_ok=False):
        """Move a monitoring group (and its counters) to ``new_group``.

        The kernel moves the group's threads to ``new_group`` as well.
        Only kernels since 6.5 can: older ones answer EPERM, and on Arm
        MPAM, where an RMID belongs to its CLOSID, the kernel answers
        EOPNOTSUPP for any new parent.

        :raises: RenameRefused on EPERM or EOPNOTSUPP; the caller moves
            the threads and re-creates the group instead.
        """
        self._check_owned(name, foreign_ok)
        src = self.path(group, name)
        dst = self.path(new_group, name)
        try:
            with self._at(src) as (src_fd, src_leaf), \
                    self._at(dst) as (dst_fd, dst_leaf):
                os.rename(src_leaf, dst_leaf, src_dir_fd=src_fd,
                          dst_dir_fd=dst_fd)
        except OSError as e:
            if e.errno == errno.EPERM:
                # kernfs refuses before resctrl sees it, leaving an old
                # last_cmd_status: it would mislead.
                raise exception.RenameRefused(
                    path=src, group=name, target=new_group or '/',
                    status=os.strerror(e.errno))
            if e.errno == errno.EOPNOTSUPP:
                # Arm MPAM: the RMID is a PMG of the old CLOSID, so
                # rdtgroup_rename() refuses a new parent, with a status.
                raise exception.RenameRefused(
                    path=src, group=name, target=new_group or '/',
                    status=self.last_cmd_status() or os.strerror(e.errno))
            if e.errno == errno.ENOENT:
                missing = dst if os.path.isdir(src) else src
                self._missing(os.path.join(missing, 'tasks'))
            raise exception.ResctrlError(
                path=src, reason='rename to %s: %s: %s' % (
                    dst, os.strerror(e.errno), self.failure_status(e.errno)))

    # Control files ---------------------------------------------------------

    def read_schemata(self, group=None):
        """The group's schemata as ``{resource: {domain_id: value}}``."""
        return schemata_mod.parse(self.read_schemata_text(group))

    def read_schemata_text(self, group=None):
        """The text of the group's ``schemata``."""
        return self._read(self.path(group, None, 'schemata'))

    def write_schemata(self, group, update):
        """Write a (partial) schemata update to ``group`` (None: default).

        :param update: ``{resource: {domain_id: value}}`` or the text.
        :raises: ResctrlWriteError with the kernel's last_cmd_status.
        """
        text = update if isinstance(update, str) else schemata_mod.format(
            update)
        self._write(self.path(group, None, 'schemata'), text)

    def read_size(self, group=None):
        """Bytes of cache per domain, ``{resource: {domain_id: bytes}}``."""
        return schemata_mod.parse(self._read(self.path(group, None, 'size')),
                                  decimal=True)

    def read_mode(self, group=None):
        return self._read(self.path(group, None, 'mode')).strip()

    def write_mode(self, group, mode):
        """Set ``shareable``, ``exclusive`` or ``pseudo-locksetup``.

        The kernel refuses a mode without its trailing newline (EINVAL).
        """
        self._write(self.path(group, None, 'mode'), mode.strip() + '\n')

    def read_tasks(self, group=None, mon_group=None):
        """Thread ids in the group (or monitoring group)."""
        return parse_tasks(self.read_tasks_text(group, mon_group))

    def read_tasks_text(self, group=None, mon_group=None):
        """The text of the group's ``tasks`` (see :func:`parse_tasks`)."""
        return self._read(self.path(group, mon_group, 'tasks'))

    def add_tasks(self, tids, group=None, mon_group=None):
        """Move threads into a group, one write per thread id.

        Threads that no longer exist (ESRCH) are skipped, not errors.

        :returns: ``(moved, gone)``: lists of thread ids.
        :raises: ResctrlWriteError for any other refusal, naming the first
            thread id that failed; threads before it have moved.
        """
        path = self.path(group, mon_group, 'tasks')
        moved, gone = [], []
        fd = self._open_for_write(path, '')
        try:
            for tid in map(int, tids):
                # One id per write: the kernel stops a multi-id write at
                # the first failure without saying which id failed.
                data = '%d\n' % tid
                try:
                    os.write(fd, data.encode())
                except ProcessLookupError:
                    gone.append(tid)
                    continue
                except OSError as e:
                    raise exception.ResctrlWriteError(
                        path, data, e.errno, os.strerror(e.errno),
                        self.failure_status(e.errno))
                moved.append(tid)
        finally:
            os.close(fd)
        return moved, gone

    def add_tasks_at_once(self, tids, group=None, mon_group=None):
        """Move threads into a group with one write of ``tid,tid,...``.

        Kernels since about 6.7/6.8 take a comma-separated list and stop at
        the first thread they refuse; older ones parse one integer per
        write and refuse a list with EINVAL, without a word in
        ``last_cmd_status``. A text longer than a page gives E2BIG on every
        kernel. Callers fall back to :meth:`add_tasks` on any error.

        :raises: ResctrlWriteError with the kernel's last_cmd_status.
        """
        self._write(self.path(group, mon_group, 'tasks'),
                    ','.join('%d' % int(t) for t in tids))

    def read_cpus(self, group=None, mon_group=None):
        """CPUs assigned to the group, from ``cpus_list``."""
        return parse_cpu_list(self._read(self.path(group, mon_group,
                                                   'cpus_list')))

    def write_cpus(self, cpus, group=None, mon_group=None):
        """Assign CPUs to the group through ``cpus_list``."""
        self._write(self.path(group, mon_group, 'cpus_list'),
                    format_cpu_list(cpus) or '\n')

    # Monitoring ------------------------------------------------------------

    def read_mon_data(self, group=None, mon_group=None, events=None):
        """Counters of a group: ``{domain_id: {event: MonValue}}``.

        A control group's counters include those of its monitoring groups.

        :param events: event file names to read (default: every file).
        """
        base = self.path(group, mon_group, 'mon_data')
        result = {}
        try:
            names = sorted(os.listdir(base))
        except FileNotFoundError:
            self._missing(base)
        for name in names:
            match = _MON_DIR.match(name)
            if not match:
                continue
            dom_dir = os.path.join(base, name)
            values = {}
            for event in events or sorted(os.listdir(dom_dir)):
                try:
                    with open(os.path.join(dom_dir, event)) as f:
                        values[event] = parse_mon_value(f.read())
                except FileNotFoundError:
                    continue
                except OSError as e:
                    # The kernel returns EIO for a counter in error state
                    # on some versions instead of the text "Error".
                    values[event] = MonValue(None, os.strerror(e.errno))
            result[int(match.group(1))] = values
        return result

    # Counter assignment (mbm_event mode, 6.18+) ---------------------------

    def read_available_counters(self):
        """``{domain id: free MBM counters}`` (``available_mbm_cntrs``)."""
        return info_mod.parse_domain_counts(
            self._read(os.path.join(self.root, 'info', 'L3_MON',
                                    'available_mbm_cntrs')),
            'available_mbm_cntrs')

    def read_assignments(self, group=None, mon_group=None):
        """A group's counters: ``{event: {domain id: 'e' or '_'}}``.

        From ``mbm_L3_assignments``: one ``<event>:<id>=<state>;...`` line
        per MBM event.
        """
        text = self._read(self.path(group, mon_group, ASSIGNMENTS))
        found = {}
        for line in text.splitlines():
            event, sep, rest = line.strip().partition(':')
            if not sep:
                continue
            doms = {}
            for item in rest.split(';'):
                dom, eq, state = item.strip().partition('=')
                if eq and dom.strip().isdigit():
                    doms[int(dom)] = state.strip()
            found[event.strip()] = doms
        return found

    def write_assignment(self, group, mon_group, event, state, domain='*'):
        """Assign (``'e'``) or release (``'_'``) a counter of ``event``.

        :param domain: a domain id, or ``'*'`` for every domain.
        :raises: ResctrlWriteError with last_cmd_status (for example when
            no counter is free).
        """
        self._write(self.path(group, mon_group, ASSIGNMENTS),
                    '%s:%s=%s\n' % (event, domain, state))

    # Locking ---------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self):
        """Hold ``flock(LOCK_EX)`` on the root, as libvirt does.

        Re-entrant within this object, so a multi-step change can call
        helpers that lock too.
        """
        with self._lock:
            if self._lock_depth == 0:
                try:
                    fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY |
                                 os.O_CLOEXEC)
                except OSError:
                    raise exception.ResctrlNotMounted(path=self.root)
                try:
                    # libvirt or the agent may hold it: where eventlet runs
                    # the process (nova-compute on Nova 31 to 33), wait on
                    # a real thread, not with every green thread stopped.
                    concurrency.blocking(fcntl.flock, fd, fcntl.LOCK_EX)
                except Exception:
                    os.close(fd)
                    raise
                self._lock_fd = fd
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    fd, self._lock_fd = self._lock_fd, None
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
