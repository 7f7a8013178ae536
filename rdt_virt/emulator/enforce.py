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

"""Emulated MBA with a physical effect: throttled threads really slow down.

The emulated memory traffic of a thread is its CPU time times the profile's
``mbm_bytes_per_cpu_second`` (see :mod:`counters`), so in this model memory
bandwidth *is* CPU time, and an MBA throttle becomes a limit on the CPU time
of the throttled threads. Each thread of a throttled control group gets a
CPU *share* (:func:`thread_cpu_share`):

* MB in percent (Intel) or in AMD units: the throttle is per core, so the
  share is ``value / max_bandwidth`` of one CPU, whatever the others do (the
  lowest value over the domains: a thread moves between them);
* MB in MBps (``mba_MBps``): the cap is the control group's aggregate, so
  the group may use ``MBps x 2^20 / mbm_bytes_per_cpu_second`` CPUs summed
  over the domains, split evenly among its threads.

The share becomes two CFS settings of a cgroup holding only that thread:

quota
    ``share x period`` of CPU time per period: the cap, which is what MBA
    does to a core when memory is not saturated.
weight
    ``cpu.shares`` (v1) or ``cpu.weight`` (v2) scaled by the share: when
    the CPUs are contended (memory saturated, in the model) a throttled core
    issues its requests ``share`` times as often as an unthrottled one and
    gets that much less of what is left. Without it, a host busier than the
    emulated guests would hide the throttle whenever the threads already got
    less than their cap.

The counters then need no throttle factor of their own: they follow the CPU
time the threads really got, so they agree with what each group ran. The
model is told so through ``ResctrlModel.mba_effect``.

Placement, cgroup v1: the weight only counts against sibling cgroups, and
the guests' siblings are the other guests: a vCPU thread of a libvirt
domain (``.../<partition>/qemu-N-NAME.libvirt-qemu/vcpuK``, or a
``machine-qemu...scope`` under systemd) gets ``rdt-virt-mba.<tid>`` in the
domain's partition, beside the domains; any other thread gets it inside its
own cgroup. libvirt's per-domain CPU controls no longer apply to a thread
while it is there (and where ``cpu`` and ``cpuacct`` are mounted together,
the domain's CPU accounting misses it). cgroup v2 does not let a thread
leave its process's subtree: the cgroup is made inside the thread's own
(``cgroup.type`` ``threaded``, ``+cpu`` in the parent's
``cgroup.subtree_control``), where the quota holds but the weight only
counts against the thread's siblings. A thread goes back to its own cgroup
when its group is no longer throttled; the enforcer removes the cgroups of
threads that exited.

Not emulated: threads that the kernel throttles only through a group's
``cpus`` file; and cache allocation (CAT), which has no physical effect (a
CPU cgroup cannot shrink a cache). Without a usable cgroup CPU controller,
:func:`start` logs why and the emulator falls back to scaling the counters
by the throttle.
"""

import collections
import os
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: CFS period of every limit, in microseconds (the kernel's default).
PERIOD_US = 100000
#: The kernel refuses quotas under 1 ms.
MIN_QUOTA_US = 1000
PREFIX = 'rdt-virt-mba.'
MIB = 1024 * 1024


# The mapping (pure) ----------------------------------------------------------

def thread_cpu_share(profile, mb_values, nthreads=1):
    """Share of one CPU each thread of a control group may use, or None.

    :param profile: the emulated :class:`~profiles.Profile`.
    :param mb_values: ``{domain: MB value}`` of the group's schemata.
    :param nthreads: threads in the group (MBps caps are per group).
    :returns: a float in (0, 1), or None when the group is not throttled.
    """
    mb = profile.mb
    if not mb or not mb_values:
        return None
    if profile.mba_mbps:
        cpus = (sum(mb_values.values()) * MIB /
                float(profile.counters.mbm_bytes_per_cpu_second))
        share = cpus / max(1, nthreads)
    else:
        share = min(mb_values.values()) / float(mb.max_bandwidth)
    return share if share < 1.0 else None


def cfs_quota_us(share, period_us=PERIOD_US):
    """CFS quota in microseconds per *period_us* for a CPU *share*."""
    return max(MIN_QUOTA_US, int(round(share * period_us)))


def v1_shares(share):
    """``cpu.shares`` for a CPU *share* (1024 unthrottled; at least 2)."""
    return max(2, int(round(share * 1024)))


def v2_weight(share):
    """``cpu.weight`` for a CPU *share* (100 unthrottled; at least 1)."""
    return max(1, int(round(share * 100)))


def desired_shares(profile, members, mb_config):
    """``{tid: CPU share}`` for every thread that must be slowed.

    :param members: ``{tid: control group}`` (threads moved out of the
        default group).
    :param mb_config: ``f(control group) -> {domain: MB value}``.
    """
    by_group = collections.defaultdict(list)
    for tid, ctrl in members.items():
        by_group[ctrl].append(tid)
    out = {}
    for ctrl, tids in by_group.items():
        share = thread_cpu_share(profile, mb_config(ctrl), len(tids))
        if share is not None:
            for tid in tids:
                out[tid] = share
    return out


def _domain_level(path):
    """(components of *path*, index of its libvirt domain's), or None."""
    parts = path.strip('/').split('/')
    for i, name in enumerate(parts):
        if name.endswith('.libvirt-qemu') or (
                name.startswith('machine-qemu') and name.endswith('.scope')):
            return parts, i
    return None


def libvirt_partition(path):
    """The partition above a libvirt domain's cgroup in *path*, or None.

    ``/machine/qemu-1-vm.libvirt-qemu/vcpu0`` gives ``/machine``;
    ``/machine.slice/machine-qemu\\x2d1\\x2dvm.scope/libvirt/vcpu0`` gives
    ``/machine.slice``.
    """
    found = _domain_level(path)
    return '/' + '/'.join(found[0][:found[1]]) if found else None


def libvirt_domain(path):
    """The cgroup of the libvirt domain in *path*, or None.

    ``/machine/qemu-1-vm.libvirt-qemu/vcpu0`` gives
    ``/machine/qemu-1-vm.libvirt-qemu``.
    """
    found = _domain_level(path)
    return '/' + '/'.join(found[0][:found[1] + 1]) if found else None


# cgroup I/O ------------------------------------------------------------------

class CgroupError(Exception):
    """A cgroup operation failed; the text says which and why."""


def _read(path):
    with open(path) as f:
        return f.read()


def _read_or_empty(path):
    try:
        return _read(path)
    except OSError:
        return ''


def _write(path, text):
    try:
        with open(path, 'w') as f:
            f.write(text)
    except OSError as e:
        raise CgroupError('writing %r to %s: %s' % (text, path,
                                                    e.strerror or e))


class _Backend(object):
    """Where a thread's CPU cgroup is and how to limit it."""

    version = None
    #: The file listing a cgroup's threads.
    threads_file = None

    def __init__(self, mount, proc):
        self.mount = mount
        self.proc = proc

    def own_cgroup(self, tid):
        """Path (under the mount) of *tid*'s CPU cgroup, or None."""
        try:
            text = _read(os.path.join(self.proc, str(tid), 'cgroup'))
        except OSError:
            return None
        for line in text.splitlines():
            path = self.match(line.split(':', 2))
            if path is not None:
                return path
        return None

    def path(self, rel):
        return os.path.join(self.mount, rel.lstrip('/'))

    def create(self, parent, name, share):
        """Make ``parent/name`` limited to *share* of a CPU."""
        path = os.path.join(self.path(parent), name)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise CgroupError('mkdir %s: %s' % (path, e.strerror))
        try:
            self.prepare(path)
            self.set_share(path, share)
        except CgroupError:
            try:
                os.rmdir(path)
            except OSError:
                pass
            raise
        return path

    def attach(self, cgroup_dir, tid):
        _write(os.path.join(cgroup_dir, self.threads_file), str(tid))

    def remove(self, cgroup_dir):
        try:
            os.rmdir(cgroup_dir)
        except FileNotFoundError:
            pass
        except OSError as e:
            # EBUSY: a thread is still inside (it will be re-tried).
            raise CgroupError('rmdir %s: %s' % (cgroup_dir, e.strerror))


class CgroupV1(_Backend):
    """The cgroup v1 ``cpu`` hierarchy."""

    version = 1
    threads_file = 'tasks'

    @staticmethod
    def match(fields):
        if len(fields) == 3 and 'cpu' in fields[1].split(','):
            return fields[2]
        return None

    def usable(self):
        return os.path.exists(os.path.join(self.mount, 'cpu.cfs_quota_us'))

    @staticmethod
    def parent_for(own):
        return libvirt_partition(own) or own

    def prepare(self, path):
        pass

    def set_share(self, path, share):
        _write(os.path.join(path, 'cpu.cfs_period_us'), str(PERIOD_US))
        _write(os.path.join(path, 'cpu.cfs_quota_us'),
               str(cfs_quota_us(share)))
        self.set_weight(path, share)

    def set_weight(self, path, share):
        _write(os.path.join(path, 'cpu.shares'), str(v1_shares(share)))


class CgroupV2(_Backend):
    """The unified hierarchy with the ``cpu`` controller."""

    version = 2
    threads_file = 'cgroup.threads'

    @staticmethod
    def match(fields):
        if len(fields) == 3 and fields[0] == '0' and fields[1] == '':
            return fields[2]
        return None

    def usable(self):
        try:
            controllers = _read(os.path.join(self.mount,
                                             'cgroup.controllers')).split()
        except OSError:
            return False
        return 'cpu' in controllers

    def prepare(self, path):
        # A thread may only move into a threaded cgroup of its own
        # process's subtree, and the cpu controller must reach it.
        parent = os.path.dirname(path)
        enabled = _read_or_empty(os.path.join(
            parent, 'cgroup.subtree_control')).split()
        if 'cpu' not in enabled:
            _write(os.path.join(parent, 'cgroup.subtree_control'), '+cpu')
        if _read_or_empty(os.path.join(
                path, 'cgroup.type')).strip() != 'threaded':
            _write(os.path.join(path, 'cgroup.type'), 'threaded')

    @staticmethod
    def parent_for(own):
        return own

    def set_share(self, path, share):
        _write(os.path.join(path, 'cpu.max'),
               '%d %d' % (cfs_quota_us(share), PERIOD_US))
        self.set_weight(path, share)

    def set_weight(self, path, share):
        _write(os.path.join(path, 'cpu.weight'), str(v2_weight(share)))


def probe(cgroup_root='/sys/fs/cgroup', proc='/proc'):
    """The first usable cgroup CPU controller.

    :returns: ``(backend, None)``, or ``(None, reason)`` when there is none.
    """
    candidates = [CgroupV1(os.path.join(cgroup_root, name), proc)
                  for name in ('cpu', 'cpu,cpuacct', 'cpuacct,cpu')]
    candidates += [CgroupV2(cgroup_root, proc),
                   CgroupV2(os.path.join(cgroup_root, 'unified'), proc)]
    for backend in candidates:
        if backend.usable():
            return backend, None
    return None, ('no cgroup CPU controller under %s (neither a v1 "cpu" '
                  'hierarchy with cpu.cfs_quota_us nor cgroup v2 with "cpu" '
                  'in cgroup.controllers)' % cgroup_root)


_Placement = collections.namedtuple('_Placement', 'home path share')


class Enforcer(object):
    """Keeps the CPU limits of throttled threads in step with resctrl.

    :param model: the :class:`~model.ResctrlModel` (its lock is taken only
        to read who is where).
    :param backend: a backend from :func:`probe`.
    """

    def __init__(self, model, backend):
        self.model = model
        self.backend = backend
        self.placements = {}
        self._warned = set()
        # Cgroups whose rmdir failed (a dying thread still in it): retried.
        self._stale = set()

    def _desired(self):
        with self.model.lock:
            members = self.model.members()
            return desired_shares(
                self.model.profile, members,
                lambda ctrl: ctrl.config.get('MB', {}))

    def apply(self):
        """One pass: limit, re-limit or release threads as needed."""
        desired = self._desired()
        for path in list(self._stale):
            self._remove(path)
        for tid in list(self.placements):
            if tid not in desired:
                self._release(tid)
        for tid, share in desired.items():
            try:
                self._limit(tid, share)
            except (CgroupError, OSError) as e:
                if tid not in self._warned:
                    self._warned.add(tid)
                    LOG.warning('cannot slow down thread %d: %s', tid, e)

    def _limit(self, tid, share):
        current = self.backend.own_cgroup(tid)
        if current is None:
            return                      # exited
        current = current.rstrip('/') or '/'
        place = self.placements.get(tid)
        name = PREFIX + str(tid)
        if place and os.path.basename(current) == name:
            if place.share != share:
                self.backend.set_share(place.path, share)
                self.placements[tid] = place._replace(share=share)
            return
        # Not (or no longer) in ours: where it is now is its home.
        home = current
        if os.path.basename(current).startswith(PREFIX):
            home = place.home if place else os.path.dirname(current)
        path = self.backend.create(self.backend.parent_for(home), name,
                                   share)
        try:
            self.backend.attach(path, tid)
        except CgroupError:
            # Typically the thread exited meanwhile: its cgroup must not
            # outlive it.
            if not place or place.path != path:
                self._remove(path)
            raise
        if place and place.path != path:
            self._remove(place.path)
        self.placements[tid] = _Placement(home, path, share)
        LOG.debug('thread %d limited to %.3f of a CPU in %s', tid, share,
                  path)

    def _release(self, tid):
        place = self.placements.pop(tid)
        self._warned.discard(tid)
        current = self.backend.own_cgroup(tid)
        if current is not None and os.path.basename(
                current.rstrip('/')) == PREFIX + str(tid):
            try:
                self.backend.attach(self.backend.path(place.home), tid)
            except CgroupError as e:
                LOG.warning('cannot give thread %d its CPU time back: %s',
                            tid, e)
                return
        self._remove(place.path)

    def _remove(self, path):
        try:
            self.backend.remove(path)
            self._stale.discard(path)
        except CgroupError as e:
            LOG.debug('%s; will retry', e)
            self._stale.add(path)

    def release_all(self, timeout=5.0, clock=time.monotonic):
        """Give every thread its own cgroup back (the emulator stops)."""
        for tid in list(self.placements):
            self._release(tid)
        deadline = clock() + timeout
        while self._stale and clock() < deadline:
            time.sleep(0.1)
            for path in list(self._stale):
                self._remove(path)
        for path in self._stale:
            LOG.warning('could not remove cgroup %s', path)

    def describe(self):
        """What the control socket's ``status`` shows."""
        return {'backend': 'cgroup-v%d' % self.backend.version,
                'mount': self.backend.mount,
                'period_us': PERIOD_US,
                'threads': {str(t): {'share': p.share,
                                     'quota_us': cfs_quota_us(p.share),
                                     'cgroup': p.path, 'home': p.home}
                            for t, p in sorted(dict(self.placements).items())}}


def start(model, cgroup_root='/sys/fs/cgroup', proc='/proc'):
    """An :class:`Enforcer` for *model*, or None (logged) if none can work.

    Sets ``model.mba_effect`` and ``model.mba_effect_status`` (for the
    control socket) accordingly.
    """
    backend, reason = probe(cgroup_root, proc)
    if backend is None:
        LOG.warning('MBA throttles have no physical effect: %s; they scale '
                    'the emulated counters only', reason)
        model.mba_effect = False
        model.mba_effect_status = lambda: {'backend': None, 'reason': reason}
        return None
    LOG.info('MBA throttles slow the threads down through CPU quotas '
             '(cgroup v%d at %s)', backend.version, backend.mount)
    enforcer = Enforcer(model, backend)
    model.mba_effect = True
    model.mba_effect_status = enforcer.describe
    return enforcer
