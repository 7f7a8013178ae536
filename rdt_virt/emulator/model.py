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

"""The resctrl kernel state of the emulated host, without any I/O.

Groups
    The root is the default control group (CLOSID 0, RMID 0). ``mkdir`` in
    the root makes a control group, which takes the lowest free CLOSID
    (``Out of CLOSIDs``/ENOSPC past the smallest ``num_closids``) and, when
    monitoring exists, an RMID; ``mkdir`` in a ``mon_groups`` directory makes
    a monitoring group, which takes an RMID only (``Out of RMIDs``: EBUSY
    while freed RMIDs wait in limbo, ENOSPC otherwise). Freed RMIDs sit in
    limbo for ``limbo_delay`` seconds when CMT exists, standing in for the
    kernel's wait until their cache occupancy drains.
Tasks
    Every thread belongs to one control group and at most one of its
    monitoring groups. Writing a tid to a control group's ``tasks`` moves it
    there and out of any monitoring group; a monitoring group only takes
    threads of its parent. The write takes a comma-separated list (one
    integer before 6.7), stops at the first failure and keeps what it moved
    before. ``0`` means the writer. A thread the emulator sees for the
    first time inherits the group of the thread that created it, as
    clone() does: for a process, the parent's thread that forked it when
    the thread source can tell, else the parent; for a thread, its
    thread-group leader.
CPUs
    Each CPU belongs to one control group (the root by default) and at most
    one of its monitoring groups. ``rmdir`` gives tasks and CPUs back to the
    parent (monitoring group) or the root (control group).
Rename
    Only a monitoring group can be renamed, into any ``mon_groups``
    directory; its tasks follow it to the new parent and its counters stay.
Remount
    Destroys every group and resets the root; optionally switches profile,
    as remounting with ``-o cdp`` or ``-o mba_MBps`` would.

Every method that can fail raises :class:`kparse.KernelError` after updating
``last_cmd_status`` exactly as the kernel does (some failures leave it
alone). :class:`ResctrlModel` is not thread-safe; hold :attr:`lock`.
"""

import collections
import dataclasses
import errno
import threading
import time

from rdt_virt.emulator import assign as assign_mod
from rdt_virt.emulator import boot
from rdt_virt.emulator import counters as counters_mod
from rdt_virt.emulator import features
from rdt_virt.emulator import kernels
from rdt_virt.emulator import kparse
from rdt_virt.emulator import profiles
from rdt_virt.emulator import rmids as rmids_mod
from rdt_virt.emulator import schemata
from rdt_virt.emulator import telemetry as telemetry_mod
from rdt_virt.resctrl import quirks

CTRL = 'ctrl'
MON = 'mon'
BMEC_ALL = features.BMEC_ALL
BMEC_LOCAL = features.BMEC_LOCAL
_STATUS_SIZE = 512


class Group(object):
    """A control (``ctrl``) or monitoring (``mon``) group."""

    def __init__(self, name, kind, parent=None, closid=0, rmid=0,
                 config=None, uid=0, gid=0, dirmode=0o755, ctime=0.0):
        self.name = name
        self.kind = kind
        self.parent = parent
        self._closid = closid
        self.rmid = rmid
        self.config = config or {}
        self.mode = schemata.SHAREABLE
        self.cpus = set()
        self.mons = collections.OrderedDict()
        self.uid, self.gid, self.dirmode, self.ctime = uid, gid, dirmode, ctime

    @property
    def closid(self):
        return self.parent.closid if self.kind == MON else self._closid

    @property
    def ctrl(self):
        return self.parent if self.kind == MON else self

    @property
    def path(self):
        """Path relative to the mount: '', 'g', 'g/mon_groups/m'."""
        if self.kind == CTRL:
            return self.name
        return '/'.join(p for p in (self.parent.path, 'mon_groups',
                                    self.name) if p)

    def __repr__(self):
        return '<Group %s>' % (self.path or '/')


class MutationLog(object):
    """Every mutation attempted, successful or not, in order."""

    def __init__(self, clock=time.time):
        self.entries = []
        self._clock = clock

    def record(self, op, path, data=None, err=0, status=None):
        entry = {'seq': len(self.entries) + 1, 'time': self._clock(),
                 'op': op, 'path': path, 'data': data,
                 'result': 'ok' if not err else errno.errorcode.get(err, err),
                 'errno': err, 'status': status}
        self.entries.append(entry)
        return entry

    def since(self, seq=0):
        """Entries with a sequence number above *seq*."""
        return [e for e in self.entries if e['seq'] > seq]


def _captured_root(profile, config):
    """Write a captured host's root schemata values into *config*.

    Only values of schemas and domains this mount has: a capture from a
    host mounted differently cannot add lines.
    """
    for name, values in profile.root_schemata:
        line = config.get(name)
        schema = profile.schema(name)
        if line is None or schema is None:
            continue
        for dom, text in values:
            if dom in line:
                line[dom] = int(text, 16 if schema.is_cache else 10)


class ResctrlModel(features.FeatureFiles):
    """The state of a mounted resctrl filesystem.

    :param profile: a :class:`~rdt_virt.emulator.profiles.Profile` or name.
    :param threads: thread source (see :mod:`threads`).
    :param clock: monotonic seconds; inject a fake one in tests.
    :param online_cpus: host CPUs (default: all CPUs of ``nr_cpu_ids``).
    :param nr_cpu_ids: width of CPU masks (default: highest CPU + 1).
    :param limbo_delay: seconds between two limbo checks (default 1.0,
        the kernel's period; 0 frees RMIDs at once).
    :param kernel: a :class:`~rdt_virt.emulator.kernels.Kernel` or spec
        (default: the newest release).
    :param legacy: shorthand for ``kernel='6.1'``.
    :param snapshot_max_age: reuse a thread snapshot this young (seconds).
    """

    def __init__(self, profile, threads, clock=time.monotonic,
                 online_cpus=None, nr_cpu_ids=None, limbo_delay=None,
                 legacy=False, snapshot_max_age=0.0, kernel=None):
        self.lock = threading.RLock()
        self.threads = threads
        self.clock = clock
        self.nr_cpu_ids = nr_cpu_ids or (max(online_cpus) + 1
                                         if online_cpus else 1)
        self.online_cpus = set(online_cpus if online_cpus is not None
                               else range(self.nr_cpu_ids))
        self._limbo_delay = 1.0 if limbo_delay is None else limbo_delay
        self.kernel = kernels.get_kernel(
            kernel if kernel is not None or not legacy else '6.1')
        self.snapshot_max_age = snapshot_max_age
        self.log = MutationLog()
        # True while throttles slow the threads themselves (see enforce):
        # the counters then follow CPU time without a throttle factor.
        self.mba_effect = False
        self.max_threshold = 0
        self._snap = None
        self._status = ''
        self._members = {}
        self.profile = None
        self.rmids = None
        self._mount(profiles.get_profile(profile))
        self._seen = set(self._snapshot())
        self._update_counters()

    # Mounting ----------------------------------------------------------------

    def _mount(self, profile):
        old = self.profile
        # What the kernel enabled at boot for this CPU and command line.
        profile = boot.apply(profile)
        profile = self._kernel_support(profile)
        if profile.mba_mbps and self._snc_ways(profile) > 1:
            # supports_mba_mbps(): MBA is per L3, monitoring per node.
            raise kparse.KernelError(
                errno.EINVAL, 'mba_MBps requires MBM and linear scale MBA '
                'at L3 scope\n')
        self.profile = profile
        self.domains = tuple(sorted(profile.assign_cpus(self.online_cpus)))
        # Control domains per schema: L2 lines have the L2 caches' ids.
        self.ctrl_domains = {None: self.domains}
        if profile.l2:
            self.ctrl_domains['L2'] = tuple(sorted(
                profile.l2_domains(self.online_cpus)))
        # kernfs makes the root directory 0555.
        config = schemata.default_config(profile, self.ctrl_domains)
        if old is None:
            _captured_root(profile, config)
        self.root = Group('', CTRL, config=config, ctime=time.time(),
                          dirmode=0o555)
        self.root.cpus = set(self.online_cpus)
        self.groups = collections.OrderedDict()
        self._members = {}
        self._status = ''
        mon = profile.mon
        self._setup_snc(profile)
        if self.rmids is None or old is None or old.mon != mon or (
                old.num_rmids != profile.num_rmids):
            limbo = dict(
                use_limbo=bool(mon) and counters_mod.OCCUPANCY in mon.events,
                interval=self._limbo_delay,
                half_life=profile.counters.occupancy_half_life,
                threshold=lambda: self.max_threshold,
                always=self.has('limbo_always'))
            if mon and mon.num_pmg:
                self.rmids = rmids_mod.PooledRmidAllocator(
                    profile.num_rmids // mon.num_pmg, mon.num_pmg,
                    self.mon_domains, **limbo)
            else:
                # The smallest monitoring resource's count (AET: 576).
                self.rmids = rmids_mod.RmidAllocator(
                    profile.num_rmids if mon else 1, self.mon_domains,
                    **limbo)
            if mon:
                self.max_threshold = mon.threshold(
                    profile.domains[0].l3_size)
        self.counters = counters_mod.Counters(
            profile, self.mon_domains, self._cpu_nodes, self._allowed_bytes,
            self._throttle, self.clock())
        self.counters.is_assigned = self._is_assigned
        if profile.mb and profile.mb.throttle_mode == 'max':
            self.counters.siblings = profile.siblings(self.online_cpus)
        self.assign = None
        if mon and mon.num_mbm_cntrs and self.has('mbm_assign'):
            self.assign = assign_mod.Assignments(
                self.domains, mon.num_mbm_cntrs, mon.events,
                carry_on=self.has('assign_continue'))
        self.assign_enabled = self.assign is not None
        self.io_alloc = False
        # BMEC: event configuration per domain (all traffic types).
        self.bmec = None
        if mon and mon.bmec and self.has('bmec'):
            self.bmec = {counters_mod.TOTAL: {d: BMEC_ALL
                                              for d in self.domains},
                         counters_mod.LOCAL: {d: BMEC_LOCAL
                                              for d in self.domains}}
        self.telemetry = None
        self.telemetry_reads = {}
        if mon and profile.telemetry:
            self.telemetry = telemetry_mod.Telemetry(profile.telemetry,
                                                     self.domains)
        if mon:
            # RMID 0 has counted the host's tasks since boot.
            self.counters.attach(self.root, seen=True)
            self._assign_new_group(self.root)

    def _kernel_support(self, profile):
        """Leave out what this kernel release does not support."""
        if profile.arch == 'mpam' and not self.has('mpam'):
            # No resctrl for MPAM before 7.1: a host without RDT.
            return dataclasses.replace(profile, l3=None, l2=None, mb=None,
                                       smba=None, mon=None, cdp=False)
        if profile.telemetry and not self.has('perf_pkg'):
            return dataclasses.replace(profile, telemetry=None)
        return profile

    def remount(self, profile=None):
        """Unmount and mount again, optionally on another profile."""
        profile = profiles.get_profile(profile or self.profile)
        self._update_counters()
        now = self.clock()
        for group in self.all_groups():
            if group is not self.root and self.profile.mon_capable:
                self._free_rmid(group, now)
        # RMID 0 keeps counting across a remount on the same hardware.
        kept = None
        if self.profile.mon and self.profile.mon == profile.mon:
            kept = self.counters.export(self.root)
        self._mount(profile)
        if kept is not None:
            self.counters.restore(self.root, kept)
        self._snap = None
        self._update_counters()

    # Sub-NUMA Cluster (6.11) ------------------------------------------------

    def _setup_snc(self, profile):
        """Monitoring domains: the L3 ids, or with SNC the NUMA nodes.

        Node ``i * snc + k`` is the k-th part of the i-th L3's CPUs; a node
        without an online CPU is offline and absent, as in the kernel.
        """
        self.snc = self._snc_ways(profile)
        blocks = profile.assign_cpus(self.online_cpus)
        self._cpu_nodes, self.node_l3 = {}, {}
        for i, dom in enumerate(profile.domains):
            cpus = blocks.get(dom.id, [])
            for k in range(self.snc):
                part = cpus[k * len(cpus) // self.snc:
                            (k + 1) * len(cpus) // self.snc]
                node = dom.id if self.snc == 1 else i * self.snc + k
                for cpu in part:
                    self._cpu_nodes[cpu] = node
                if part or (dom.id in blocks and
                            profile.all_domains_online):
                    self.node_l3[node] = dom.id
        self.mon_domains = tuple(sorted(self.node_l3))

    def _snc_ways(self, profile):
        """SNC nodes per L3 as this kernel sees them (1: none)."""
        cpu = profile.cpu
        # A captured host without its CPU identity showed the layout.
        known = cpu is None or quirks.snc_capable(cpu.vendor, cpu.family,
                                                  cpu.model)
        if profile.mon and profile.snc_ways > 1 and self.has('snc') and (
                known):
            return profile.snc_ways
        return 1

    def nodes_of(self, dom):
        """Monitoring domains of L3 domain *dom*."""
        return [n for n in self.mon_domains if self.node_l3[n] == dom]

    # RMIDs -------------------------------------------------------------------

    @property
    def limbo_delay(self):
        """Seconds between two checks of the RMIDs in limbo (0: none)."""
        return self._limbo_delay

    @limbo_delay.setter
    def limbo_delay(self, seconds):
        self._limbo_delay = seconds
        self.rmids.interval = seconds
        if seconds <= 0:
            # No limbo any more: what waits there is free.
            self.rmids.free.extend(self.rmids.limbo)
            self.rmids.limbo.clear()

    def _free_rmid(self, group, now):
        """Give back *group*'s RMID with the cache lines it still holds."""
        self.rmids.put(group.rmid, now, self.counters.occupancy(group))

    def limbo(self):
        """RMIDs in limbo with their occupancy (see :mod:`rmids`)."""
        return self.rmids.describe(self.clock())

    def set_limbo_occupancy(self, rmid, value, dom=None):
        self.rmids.set_occupancy(rmid, value, self.clock(), dom)

    # Kernel release ----------------------------------------------------------

    def has(self, feature):
        """True when the emulated kernel has *feature* (see kernels)."""
        return self.kernel.has(feature)

    @property
    def legacy(self):
        """Schemata values padded to a column, as before Linux 6.15."""
        return not self.has('no_padding')

    @property
    def usable_closids(self):
        """CLOSIDs groups can use: before 6.16 never more than 32."""
        count = self.profile.num_closids
        return count if self.has('closid_bitmap') else min(count, 32)

    # last_cmd_status ---------------------------------------------------------

    @property
    def last_cmd_status(self):
        """Text of ``info/last_cmd_status``."""
        return self._status or 'ok\n'

    def _clear(self):
        self._status = ''

    def _puts(self, text):
        if text and len(self._status) + len(text) < _STATUS_SIZE:
            self._status += text

    @staticmethod
    def _fail(err, text=''):
        raise kparse.KernelError(err, text)

    def _run(self, func, *args, clear=True):
        """Clear the status, run, and append a failure's text to it."""
        if clear:
            self._clear()
        try:
            return func(*args)
        except kparse.KernelError as e:
            self._puts(e.status)
            raise

    # Lookup ------------------------------------------------------------------

    def all_groups(self):
        for ctrl in [self.root] + list(self.groups.values()):
            yield ctrl
            for mon in ctrl.mons.values():
                yield mon

    def find(self, path):
        """The group at *path* ('' for the root), or None."""
        parts = [p for p in path.strip('/').split('/') if p]
        ctrl = self.root
        if parts and parts[0] != 'mon_groups':
            ctrl = self.groups.get(parts.pop(0))
            if ctrl is None:
                return None
        if not parts:
            return ctrl
        if len(parts) == 2 and parts[0] == 'mon_groups':
            return ctrl.mons.get(parts[1])
        return None

    def allocated(self, exclude=None):
        """``(closid, mode, config)`` of every control group but one."""
        return [(g.closid, g.mode, g.config) for g in
                [self.root] + list(self.groups.values()) if g is not exclude]

    # Threads -----------------------------------------------------------------

    def _snapshot(self, max_age=None):
        now = self.clock()
        if max_age is None:
            max_age = self.snapshot_max_age
        if self._snap is None or now - self._snap[0] >= max_age:
            self._snap = (now, self.threads.snapshot())
        return self._snap[1]

    def _creator(self, tid, tgid, ppid_of, alive=None):
        """The thread that called clone() for *tid*, as far as it matters.

        The thread source may know it (``creator``: a process's parent
        thread from ``/proc/PPID/task/*/children``); otherwise a thread's
        leader or a process's parent stands in. With *alive* (``tid ->
        tgid``), a process whose parent has no thread in a group gets
        None at once: whichever thread forked it, it stays in the default
        group, and the search would read a file per thread of the parent
        (libvirtd's, for each new QEMU).
        """
        ppid = None
        if tgid == tid and alive is not None:
            ppid = ppid_of(tid)
            if ppid is None or (ppid not in self._members and not any(
                    alive.get(m) == ppid for m in self._members)):
                return None
        known = getattr(self.threads, 'creator', None)
        creator = known(tid, tgid) if known else None
        if creator is not None:
            return creator
        if tgid != tid:
            return tgid
        return ppid_of(tid) if ppid is None else ppid

    def _inherit(self, tid, tgid, ppid_of, alive=None):
        """A new thread joins its creator's group, as clone() does."""
        if not self._members:
            return      # every thread is in the default group
        parent = self._creator(tid, tgid, ppid_of, alive)
        if parent is not None and parent != tid and parent in self._members:
            self._members[tid] = self._members[parent]

    def _observe(self, alive, ppid_of):
        """Births and deaths since the last look; ``alive``: tid -> tgid."""
        for tid, tgid in alive.items():
            if tid not in self._seen:
                self._inherit(tid, tgid, ppid_of, alive)
        for tid in [t for t in self._members if t not in alive]:
            del self._members[tid]
        self._seen = set(alive)

    def _observe_samples(self, samples):
        self._observe({t: s.tgid for t, s in samples.items()},
                      lambda tid: samples[tid].ppid)

    def _lookup_ppid(self, tid):
        sample = self.threads.lookup(tid)
        return sample.ppid if sample else None

    def refresh(self):
        """Bring tasks and counters up to date with the threads."""
        self._update_counters()

    def _owner(self, tid):
        return self._members.get(tid, self.root)

    def _update_counters(self):
        samples = self._snapshot()
        self._observe_samples(samples)
        if self.profile.mon:
            self.counters.update(self.clock(), samples, self._effective)
        if self.telemetry is not None:
            self.telemetry.update(
                samples, lambda tid, cpu: self._effective(tid, cpu)[0].rmid,
                self.profile.cpu_domains(self.online_cpus), self.clock())

    def _charge_past(self, tid, sample):
        """Charge a thread about to move to the group it leaves.

        Its own sample is enough: the kernel moves a task without looking
        at the others, and reading every thread of the host at each move
        made a write to ``tasks`` cost milliseconds per thread.
        """
        if self.profile.mon:
            self.counters.charge_thread(tid, sample, self._effective)
        if self.telemetry is not None:
            self.telemetry.charge_thread(
                tid, sample,
                lambda tid, cpu: self._effective(tid, cpu)[0].rmid,
                self.profile.cpu_domains(self.online_cpus))

    def _effective(self, tid, cpu):
        """``(RMID group, CLOSID group)`` that *tid* uses on *cpu*.

        A thread keeps its own CLOSID and RMID unless they are the default
        group's (0), which the CPU's owner overrides: ``cpus`` at work.
        """
        group = self._members.get(tid)
        if group is not None and group.ctrl is not self.root:
            return group, group.ctrl
        cpu_ctrl, cpu_rmid = self.root, self.root
        for ctrl in self.groups.values():
            if cpu in ctrl.cpus:
                cpu_ctrl = cpu_rmid = ctrl
                break
        for mon in cpu_ctrl.mons.values():
            if cpu in mon.cpus:
                cpu_rmid = mon
        return (group or cpu_rmid), cpu_ctrl

    def tasks(self, group):
        """Thread ids in *group* (a control group includes its mon groups)."""
        # Always fresh: a thread that exited must not be listed. The ids
        # alone suffice, which saves reading every thread's stat.
        alive = self.threads.tids()
        self._observe(alive, self._lookup_ppid)
        out = []
        for tid in alive:
            owner = self._owner(tid)
            if owner is group or (group.kind == CTRL and owner.ctrl is group):
                out.append(tid)
        return sorted(out)

    def members(self):
        """``{tid: control group}`` of threads outside the default group."""
        return {tid: g.ctrl for tid, g in self._members.items()
                if g.ctrl is not self.root}

    def group_of(self, tid):
        """The group holding *tid* (the root for threads never moved)."""
        return self._owner(tid)

    # Counters hooks ----------------------------------------------------------

    def _allowed_bytes(self, group, node):
        # SNC splits the L3 between its nodes.
        return schemata.allowed_l3_bytes(
            self.profile, self.node_l3[node], group.ctrl.config) // self.snc

    def _throttle(self, group, node):
        dom = self.node_l3[node]
        mb = self.profile.mb
        if not mb:
            return 1.0, None
        val = group.ctrl.config.get('MB', {}).get(dom, mb.max_bandwidth)
        if self.profile.mba_mbps:
            return 1.0, val
        if self.mba_effect:
            return 1.0, None
        if mb.unit_bytes_per_second:
            # Absolute units (AMD): a cap, except the unlimited value.
            if val >= mb.max_bandwidth:
                return 1.0, None
            return 1.0, val * mb.unit_bytes_per_second / counters_mod.MIB
        return min(1.0, val / float(mb.max_bandwidth)), None

    def read_counter(self, group, dom, event, node=None):
        """Text-ready value of a ``mon_data`` file: int or sentinel.

        With SNC, ``mon_L3_XX`` sums the nodes of L3 *dom* and
        ``mon_sub_L3_YY`` (*node*) shows one node.
        """
        self._update_counters()
        if node is not None:
            return self.counters.read(group, node, event)
        if self.snc == 1:
            return self.counters.read(group, dom, event)
        total, error = None, None
        for n in self.nodes_of(dom):
            val = self.counters.read(group, n, event)
            if isinstance(val, str):
                error = val
            else:
                total = (total or 0) + val
        return total if total is not None else error

    # Group files -------------------------------------------------------------

    def schemata_text(self, group):
        return schemata.format_schemata(self.profile, self.ctrl_domains,
                                        group.config, group.closid,
                                        not self.has('no_padding'))

    def size_text(self, group):
        return schemata.format_size(self.profile, self.ctrl_domains,
                                    group.config)

    def cpus_text(self, group, as_list=False):
        if as_list:
            return kparse.format_cpulist(group.cpus) + '\n'
        return kparse.format_cpumask(group.cpus, self.nr_cpu_ids) + '\n'

    def write_schemata(self, group, text):
        if not text.endswith('\n'):
            raise kparse.KernelError(errno.EINVAL)
        self._run(self._write_schemata, group, text[:-1])

    def _write_schemata(self, group, text):
        staged = schemata.parse_write(
            text, self.profile, self.ctrl_domains, group.closid, group.mode,
            self.allocated(exclude=group), not self.has('bw_validate'))
        self._update_counters()   # charge the past at the old throttle
        for name, values in staged.items():
            group.config.setdefault(name, {}).update(values)

    def write_mode(self, group, text):
        if not text.endswith('\n'):
            raise kparse.KernelError(errno.EINVAL)
        self._run(self._write_mode, group, text[:-1])

    def _write_mode(self, group, mode):
        if mode == group.mode:
            return
        if mode == schemata.SHAREABLE:
            group.mode = mode
        elif mode == schemata.EXCLUSIVE:
            schemata.check_exclusive(self.profile, self.ctrl_domains,
                                     group.closid, group.config,
                                     self.allocated(exclude=group))
            group.mode = mode
        elif mode == 'pseudo-locksetup':
            # The emulated parts cannot pseudo-lock (no prefetch control).
            if group is self.root:
                self._fail(errno.EINVAL, "Cannot pseudo-lock default group\n")
            if self.profile.cdp:
                self._fail(errno.EINVAL, "CDP enabled\n")
            self._fail(errno.EINVAL, "Pseudo-locking not supported\n")
        else:
            self._fail(errno.EINVAL, "Unknown or unsupported mode\n")

    def write_cpus(self, group, text, as_list=False):
        self._run(self._write_cpus, group, text, as_list)

    def _write_cpus(self, group, text, as_list):
        try:
            if as_list:
                new = kparse.parse_cpulist(text, self.nr_cpu_ids)
            else:
                new = kparse.parse_cpumask(text, self.nr_cpu_ids)
        except kparse.ParseError as e:
            self._fail(e.errno, "Bad CPU list/mask\n")
        if new - self.online_cpus:
            self._fail(errno.EINVAL, "Can only assign online CPUs\n")
        if group.kind == MON:
            parent = group.parent
            if new - parent.cpus:
                self._fail(errno.EINVAL, "Can only add CPUs to mongroup "
                                         "that belong to parent\n")
            for sibling in parent.mons.values():
                if sibling is not group:
                    sibling.cpus -= new - group.cpus
            group.cpus = set(new)
            return
        dropped = group.cpus - new
        if dropped:
            if group is self.root:
                self._fail(errno.EINVAL, "Can't drop CPUs from default "
                                         "group\n")
            self.root.cpus |= dropped
        added = new - group.cpus
        if added:
            for other in [self.root] + list(self.groups.values()):
                if other is not group and other.cpus & added:
                    other.cpus -= added
                    for mon in other.mons.values():
                        mon.cpus &= other.cpus
        group.cpus = set(new)
        for mon in group.mons.values():
            mon.cpus = set()

    def write_tasks(self, group, text, caller_tid=0, caller_uid=0):
        """Move the listed threads into *group* (see the module doc)."""
        if not self.has('multi_tasks'):
            # Before 6.7: one integer per write, checked before the lock
            # is taken, so a list fails without touching the status.
            try:
                pid = kparse.kstrtoint(kparse.strim(text), 0)
            except kparse.ParseError:
                pid = -1
            if pid < 0:
                raise kparse.KernelError(errno.EINVAL)
            self._snap = None
            return self._run(self._move_task, pid or caller_tid, group,
                             caller_uid)
        self._run(self._write_tasks, group, text, caller_tid, caller_uid)

    def _write_tasks(self, group, buf, caller_tid, caller_uid):
        self._snap = None
        while buf and buf[0] not in '\0\n':
            token, comma, rest = buf.partition(',')
            buf = rest if comma else None
            token = kparse.strim(token)
            try:
                pid = kparse.kstrtoint(token, 0)
            except kparse.ParseError:
                self._fail(errno.EINVAL,
                           "Task list parsing error pid %s\n" % token)
            if pid < 0:
                self._fail(errno.EINVAL, "Invalid pid %d\n" % pid)
            try:
                self._move_task(pid or caller_tid, group, caller_uid)
            except kparse.KernelError as e:
                self._fail(e.errno, e.status +
                           "Error while processing task %d\n" % pid)

    def _move_task(self, tid, group, caller_uid):
        sample = self.threads.lookup(tid)
        if sample is None:
            raise kparse.KernelError(errno.ESRCH, "No task %d\n" % tid)
        if caller_uid != 0 and caller_uid not in (sample.uid, sample.suid):
            raise kparse.KernelError(
                errno.EPERM, "No permission to move task %d\n" % tid)
        if tid not in self._seen:
            self._inherit(tid, sample.tgid, lambda _tid: sample.ppid)
            self._seen.add(tid)
        current = self._owner(tid)
        if current is group:
            return
        if group.kind == MON and current.closid != group.closid:
            raise kparse.KernelError(
                errno.EINVAL, "Can't move task to different control group\n")
        self._charge_past(tid, sample)
        if group is self.root:
            self._members.pop(tid, None)
        else:
            self._members[tid] = group

    def write_max_threshold(self, text):
        """``info/L3_MON/max_threshold_occupancy``: bytes, base 0."""
        try:
            value = kparse.kstrtoul(text, 0, (1 << 32) - 1)
        except kparse.ParseError as e:
            raise kparse.KernelError(e.errno)
        limit = self.profile.domains[0].l3_size
        if value > limit:
            raise kparse.KernelError(errno.EINVAL)
        scale = self.profile.mon.mon_scale
        self.max_threshold = value // scale * scale

    # Directory operations ----------------------------------------------------

    def _check_name(self, name):
        if '\n' in name:
            raise kparse.KernelError(errno.EINVAL)

    def refuse_mkdir(self):
        """mkdir where only the kernel's checks refuse it (EPERM)."""
        self._fail(errno.EPERM)

    def _mkdir_run(self, func, *args):
        # Only kernels before 5.10 cleared the status in every mkdir.
        return self._run(func, *args,
                         clear=self.has('mkdir_clear_status'))

    def refuse_rename(self, text):
        """rename the kernel refuses after its checks (EPERM, *text*)."""
        self._run(self._fail, errno.EPERM, text)

    def mkdir_ctrl(self, name, uid=0, gid=0, dirmode=0o755):
        """``mkdir /<name>``: a new control group."""
        self._check_name(name)
        if not self.profile.alloc_capable:
            return self.refuse_mkdir()
        return self._mkdir_run(self._mkdir_ctrl, name, uid, gid, dirmode)

    def _alloc_closid(self):
        used = {g.closid for g in self.groups.values()}
        if self.io_alloc:
            used.add(self._io_alloc_closid())
        free = [c for c in range(1, self.usable_closids) if c not in used]
        if not free:
            self._fail(errno.ENOSPC, "Out of CLOSIDs\n")
        if isinstance(self.rmids, rmids_mod.PooledRmidAllocator):
            # resctrl_find_cleanest_closid(): the CLOSID with the fewest
            # RMIDs in limbo, so that the new group gets one.
            now = self.clock()
            return min(free, key=lambda c: (self.rmids.dirty(c, now), c))
        return free[0]

    def _mkdir_ctrl(self, name, uid, gid, dirmode):
        now = self.clock()
        mon = self.profile.mon_capable
        if self.has('rmid_after_closid'):
            closid = self._alloc_closid()
            rmid = self._alloc_rmid(closid) if mon else 0
        else:
            # Before 6.9 the RMID came first; without a CLOSID it is
            # freed again, into limbo like any other.
            rmid = self._alloc_rmid() if mon else 0
            try:
                closid = self._alloc_closid()
            except kparse.KernelError:
                if mon:
                    self.rmids.put(rmid, now)
                raise
        try:
            config = schemata.init_config(
                self.profile, self.ctrl_domains, closid, self.allocated())
        except kparse.KernelError:
            if mon:
                self.rmids.put(rmid, now)
            raise
        group = Group(name, CTRL, closid=closid, rmid=rmid, config=config,
                      uid=uid, gid=gid, dirmode=dirmode, ctime=time.time())
        self.groups[name] = group
        if self.profile.mon_capable:
            self.counters.attach(group)
            self._assign_new_group(group)
        return group

    def mkdir_mon(self, parent, name, uid=0, gid=0, dirmode=0o755):
        """``mkdir <parent>/mon_groups/<name>``: a new monitoring group."""
        self._check_name(name)
        if not self.profile.mon_capable:
            return self.refuse_mkdir()
        return self._mkdir_run(self._mkdir_mon, parent, name, uid, gid,
                               dirmode)

    def _alloc_rmid(self, closid=0):
        return self.rmids.alloc(self.clock(), closid)

    def _mkdir_mon(self, parent, name, uid, gid, dirmode):
        rmid = self._alloc_rmid(parent.closid)
        group = Group(name, MON, parent=parent, rmid=rmid, uid=uid, gid=gid,
                      dirmode=dirmode, ctime=time.time())
        parent.mons[name] = group
        self.counters.attach(group)
        self._assign_new_group(group)
        return group

    def rmdir(self, group):
        """Remove a group; its tasks and CPUs go back (status untouched)."""
        if group is self.root:
            raise kparse.KernelError(errno.EPERM)
        self._snap = None
        self._update_counters()
        now = self.clock()
        mon = self.profile.mon_capable
        if group.kind == MON:
            for tid, owner in list(self._members.items()):
                if owner is group:
                    self._members[tid] = group.parent
            del group.parent.mons[group.name]
            to_free = [group]
        else:
            for tid, owner in list(self._members.items()):
                if owner.ctrl is group:
                    del self._members[tid]
            self.root.cpus |= group.cpus
            del self.groups[group.name]
            to_free = [group] + list(group.mons.values())
        for g in to_free:
            if mon:
                self._free_rmid(g, now)
                self.counters.detach(g)
                if self.assign is not None:
                    self.assign.release(g)

    def rename_mon(self, group, new_parent, new_name):
        """Move monitoring group *group* to *new_parent* as *new_name*."""
        self._run(self._rename_mon, group, new_parent, new_name)

    def _rename_mon(self, group, new_parent, new_name):
        if group.cpus and group.parent is not new_parent:
            self._fail(errno.EPERM,
                       "Cannot move a MON group that monitors CPUs\n")
        if new_parent.mons.get(new_name, group) is not group:
            self._fail(errno.EEXIST)
        if (isinstance(self.rmids, rmids_mod.PooledRmidAllocator) and
                new_parent.closid != group.parent.closid):
            # MPAM: the PMG is an extension of the PARTID, so the RMID
            # index would change (rdtgroup_rename()).
            self._fail(errno.EOPNOTSUPP,
                       "changing parent control group not supported\n")
        self._snap = None
        self._update_counters()
        del group.parent.mons[group.name]
        group.name = new_name
        group.parent = new_parent
        new_parent.mons[new_name] = group

    # Info files --------------------------------------------------------------

    def bit_usage_text(self, schema):
        return schemata.format_bit_usage(schema, self.ctrl_domains,
                                         self.allocated())

    def counter_truth(self):
        """Ground truth: every group's counters as their files show them."""
        self._update_counters()
        out = {}
        if not self.profile.mon:
            return out
        for group in self.all_groups():
            out[group.path or '/'] = {
                'shown': {d: {e: self.read_counter(group, d, e)
                              for e in self.profile.mon.events}
                          for d in self.domains},
                'own': self.counters.describe(group),
            }
        return out
