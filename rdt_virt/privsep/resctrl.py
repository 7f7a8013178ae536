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

"""Privileged resctrl writes: the only ones rdt-virt-agent makes.

Each entrypoint takes plain values (group names, thread ids, schemata
text), checks them, and acts on the resctrl filesystem at ``[rdt]
resctrl_root`` as configured for the daemon, never on a path from the
caller:

* every name must pass :func:`rdt_virt.resctrl.fs.validate_group_name`
  (no ``/``, no ``.``/``..``, no reserved name), and the resulting path
  must resolve below the resctrl root;
* control groups the agent may create, write or fill are its own (``[rdt]
  group_prefix``) or libvirt's (``qemu-<id>-<name>``, restored after a
  remount); it may only remove its own;
* monitoring groups must be its own; their parent may be any of the above
  or the default group (``None``);
* thread ids are positive integers, schemata text must parse and be
  printable ASCII lines (what Python and the kernel split alike);
* every path the call touches, and the directory it creates in, must
  resolve below the resctrl root (a symlink out of it is refused; the
  real resctrl has none, but the root is configurable); where the path
  holds no link, the change is made from the directory that was checked
  (:func:`beneath`);
* lists and texts have size limits (:data:`MAX_TIDS`,
  :data:`MAX_SCHEMATA`, 255 characters per name).

Bad arguments raise ValueError. The kernel's refusals do not raise: each
entrypoint returns ``{'ok': bool, 'error': code, 'message': text}`` with a
code from :data:`ERRORS`, so nothing but plain data crosses the privsep
channel.
"""

import contextlib
import errno
import os
import re
import stat

from oslo_config import cfg

from rdt_virt import exception
from rdt_virt import privsep
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import names
from rdt_virt.resctrl import schemata as schemata_mod

CONF = cfg.CONF

OK = {'ok': True, 'error': None, 'message': None}
E_NOSPACE = 'nospace'
E_BUSY = 'busy'
E_EXISTS = 'exists'
E_NOTFOUND = 'notfound'
E_NOTMOUNTED = 'notmounted'
E_REFUSED = 'refused'
# A monitoring group rename the kernel cannot do (before 6.5: EPERM).
E_NORENAME = 'norename'
ERRORS = (E_NOSPACE, E_BUSY, E_EXISTS, E_NOTFOUND, E_NOTMOUNTED, E_REFUSED,
          E_NORENAME)

MAX_TIDS = 65536
MAX_TID = 2 ** 22          # the kernel's largest pid_max
MAX_SCHEMATA = 8192
# kernfs takes at most one page per write (E2BIG beyond).
MAX_WRITE = 4000
# Printable ASCII and newlines only: str.splitlines() also breaks at
# \x1c-\x1e, \x85 and \u2028, where the kernel, splitting at '\n' only,
# would see one line; what is checked must be what the kernel parses.
_SCHEMATA_TEXT = re.compile(r'[\x20-\x7e\t\n]*')
_RESOURCE = re.compile(r'[A-Z][A-Z0-9_]*')


# Whether the kernel takes several thread ids per write: None until seen.
_MULTI_TID = {'supported': None}


def _chunks(tids):
    """Split thread ids into comma lists that fit in one write."""
    chunk, size = [], 0
    for tid in tids:
        length = len(str(tid)) + 1
        if chunk and size + length > MAX_WRITE:
            yield chunk
            chunk, size = [], 0
        chunk.append(tid)
        size += length
    if chunk:
        yield chunk


def _resctrl():
    return _Beneath(CONF.rdt.resctrl_root, CONF.rdt.group_prefix,
                    osrelease=CONF.rdt.kernel_release_file)


_is_libvirt = names.is_libvirt_group


def _name(name):
    try:
        fs.validate_group_name(name)
    except exception.InvalidGroupName as e:
        raise ValueError(str(e))
    return name


def check_control_group(name, allow_root=False, allow_libvirt=True):
    """Validate a control group argument; None is the default group."""
    if name is None:
        if not allow_root:
            raise ValueError('the default group is not allowed here')
        return None
    _name(name)
    if name.startswith(CONF.rdt.group_prefix):
        return name
    if allow_libvirt and _is_libvirt(name):
        return name
    raise ValueError('resctrl group %r is neither rdt-virt\'s (prefix %r) '
                     'nor a libvirt domain\'s' % (name,
                                                  CONF.rdt.group_prefix))


def check_mon_group(name):
    """Validate a monitoring group argument: one of rdt-virt's."""
    _name(name)
    if not name.startswith(CONF.rdt.group_prefix):
        raise ValueError('monitoring group %r is not rdt-virt\'s (prefix '
                         '%r)' % (name, CONF.rdt.group_prefix))
    return name


def check_tids(tids):
    """Validate a list of thread ids; returns them as a list of ints."""
    if not isinstance(tids, (list, tuple)) or len(tids) > MAX_TIDS:
        raise ValueError('thread ids must be a list of at most %d' %
                         MAX_TIDS)
    out = []
    for tid in tids:
        if isinstance(tid, bool) or not isinstance(tid, int) or not (
                0 < tid <= MAX_TID):
            raise ValueError('invalid thread id %r' % (tid,))
        out.append(tid)
    return out


def check_schemata(text):
    """Validate schemata text: it must parse and stay small."""
    if not isinstance(text, str) or not text.strip() or (
            len(text) > MAX_SCHEMATA):
        raise ValueError('schemata must be non-empty text of at most %d '
                         'characters' % MAX_SCHEMATA)
    if not _SCHEMATA_TEXT.fullmatch(text):
        raise ValueError('schemata must be printable ASCII lines')
    try:
        parsed = schemata_mod.parse(text)
    except exception.InvalidSchemata as e:
        raise ValueError(str(e))
    for res in parsed:
        if not _RESOURCE.fullmatch(res):
            raise ValueError('invalid resource name %r' % res)
    return text


# Each step of a walk below the root: a directory, never through a link
# (O_NOFOLLOW | O_DIRECTORY fails on one, with ENOTDIR or ELOOP).
_WALK = os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_DIRECTORY


def beneath(top, path):
    """``(directory fd, name)`` to change ``path`` through, checked.

    :raises ValueError: unless ``path`` resolves below ``top`` as
        os.path.realpath() resolves it.

    realpath() stats every prefix of the path from ``/``, looking the
    first names below the root up again for each deeper one, and a change
    by path looks them all up once more: on the emulator's FUSE resctrl
    every lookup is a round trip to its daemon. The walk goes down from
    the root's real path with O_PATH descriptors, one lookup a name; when
    it meets only directories (the last name may be anything but a link,
    or missing) it returns the last of them, for the change to be made
    there: what was checked is then what changes, whatever happens to the
    path meanwhile. Anything else (a link, a missing directory, an error)
    is checked with realpath() and changed by path: ``(None, path)``.
    """
    real_top = os.path.realpath(top)
    rel = os.path.relpath(path, top)
    parts = rel.split(os.sep)
    if rel != os.curdir and not os.path.isabs(rel) and not (
            {os.pardir, os.curdir} & set(parts)):
        fd = None
        try:
            fd = os.open(real_top, _WALK)
            for name in parts[:-1]:
                parent, fd = fd, None
                try:
                    fd = os.open(name, _WALK, dir_fd=parent)
                finally:
                    os.close(parent)
            try:
                link = stat.S_ISLNK(os.stat(parts[-1], dir_fd=fd,
                                            follow_symlinks=False).st_mode)
            except FileNotFoundError:
                link = False        # one to make
            if not link:
                found, fd = fd, None
                return found, parts[-1]
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)
    real = os.path.realpath(path)
    if real != real_top and not real.startswith(real_top + os.sep):
        raise ValueError('%s is outside the resctrl root %s' % (path, top))
    return None, path


class _Beneath(fs.Resctrl):
    """A Resctrl whose every change is checked by :func:`beneath` first."""

    @contextlib.contextmanager
    def _at(self, path):
        fd, name = beneath(self.root, path)
        try:
            yield fd, name
        finally:
            if fd is not None:
                os.close(fd)


def _failure(e):
    if isinstance(e, exception.NoSpace):
        code = E_NOSPACE
    elif isinstance(e, exception.RMIDBusy):
        code = E_BUSY
    elif isinstance(e, exception.GroupExists):
        code = E_EXISTS
    elif isinstance(e, exception.ResctrlNotMounted):
        code = E_NOTMOUNTED
    elif isinstance(e, exception.GroupNotFound):
        code = E_NOTFOUND
    elif isinstance(e, exception.RenameRefused):
        code = E_NORENAME
    else:
        code = E_REFUSED
    return {'ok': False, 'error': code, 'message': str(e)}


def _run(func, *args):
    try:
        func(*args)
    except (exception.ResctrlError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            return {'ok': False, 'error': E_NOTFOUND, 'message': str(e)}
        if isinstance(e, OSError):
            return {'ok': False, 'error': E_REFUSED, 'message': str(e)}
        return _failure(e)
    return dict(OK)


@privsep.sys_admin_pctxt.entrypoint
def create_group(name):
    """mkdir control group ``name`` (rdt-virt's or libvirt's)."""
    check_control_group(name)
    rc = _resctrl()
    return _run(rc.create_group, name, True)


@privsep.sys_admin_pctxt.entrypoint
def remove_group(name):
    """rmdir control group ``name``; only rdt-virt's own."""
    check_control_group(name, allow_libvirt=False)
    rc = _resctrl()
    return _run(rc.remove_group, name)


@privsep.sys_admin_pctxt.entrypoint
def create_mon_group(group, name):
    """mkdir monitoring group ``name`` under control group ``group``."""
    check_control_group(group, allow_root=True)
    check_mon_group(name)
    rc = _resctrl()
    return _run(rc.create_mon_group, name, group, True)


@privsep.sys_admin_pctxt.entrypoint
def remove_mon_group(group, name):
    """rmdir monitoring group ``name`` of ``group``."""
    check_control_group(group, allow_root=True)
    check_mon_group(name)
    rc = _resctrl()
    return _run(rc.remove_mon_group, name, group, True)


@privsep.sys_admin_pctxt.entrypoint
def move_mon_group(name, group, new_group):
    """Rename monitoring group ``name`` from ``group`` to ``new_group``."""
    check_mon_group(name)
    check_control_group(group, allow_root=True)
    check_control_group(new_group, allow_root=True)
    rc = _resctrl()
    return _run(rc.move_mon_group, name, group, new_group, True)


@privsep.sys_admin_pctxt.entrypoint
def assign_counter(group, mon_group, event, state):
    """Give (``'e'``) or take (``'_'``) an MBM counter of a group's event.

    Only in counter-assignment mode (``mbm_event``, 6.18+); every domain.
    """
    # The default group's own counters are not the agent's to give away.
    check_control_group(group, allow_root=mon_group is not None)
    if mon_group is not None:
        check_mon_group(mon_group)
    if event not in ('mbm_total_bytes', 'mbm_local_bytes'):
        raise ValueError('invalid MBM event %r' % (event,))
    if state not in (fs.ASSIGNED, fs.UNASSIGNED):
        raise ValueError('invalid assignment %r' % (state,))
    rc = _resctrl()
    return _run(rc.write_assignment, group, mon_group, event, state)


@privsep.sys_admin_pctxt.entrypoint
def write_schemata(group, text):
    """Write (partial) schemata ``text`` to ``group`` (None: default)."""
    check_control_group(group, allow_root=True)
    check_schemata(text)
    rc = _resctrl()
    return _run(rc.write_schemata, group, text)


@privsep.sys_admin_pctxt.entrypoint
def assign_tasks(group, mon_group, tids):
    """Move threads into a control group or one of its monitoring groups.

    :returns: the usual result plus ``moved`` and ``gone`` (threads that
        had exited) lists; on a refusal, the threads before the refused
        one have moved.
    """
    check_control_group(group, allow_root=True)
    if mon_group is not None:
        check_mon_group(mon_group)
    tids = check_tids(tids)
    rc = _resctrl()
    moved, gone = [], []
    refusal = None
    if len(tids) > 1 and _MULTI_TID['supported'] is not False:
        # One write instead of one per thread; on any refusal (an exited
        # thread, an old kernel) the per-thread writes below sort it out,
        # re-moving a moved thread being harmless.
        try:
            for chunk in _chunks(tids):
                rc.add_tasks_at_once(chunk, group, mon_group)
            _MULTI_TID['supported'] = True
            return dict(OK, moved=list(tids), gone=[])
        except (exception.ResctrlError, OSError) as e:
            refusal = getattr(e, 'errno', None)
    try:
        moved, gone = rc.add_tasks(tids, group, mon_group)
        if (_MULTI_TID['supported'] is None and not gone and
                len(tids) > 1 and refusal == errno.EINVAL):
            # Every thread was fine alone: the kernel cannot parse a list
            # (E2BIG or another refusal says nothing about lists).
            _MULTI_TID['supported'] = False
    except (exception.ResctrlError, OSError) as e:
        result = (_failure(e) if isinstance(e, exception.ResctrlError)
                  else {'ok': False, 'error': E_REFUSED, 'message': str(e)})
        result.update(moved=[], gone=[])
        return result
    return dict(OK, moved=list(moved), gone=list(gone))
