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

"""QEMU processes and their threads, from procfs.

libvirt starts QEMU with ``-name guest=<name>,debug-threads=on``, so each
vCPU thread is named ``CPU <n>/KVM`` in ``/proc/<pid>/task/<tid>/comm``;
the other threads are the main (emulator) thread, I/O threads, worker
threads and, from Linux 6.4, vhost workers. A domain's QEMU process is
found through libvirt's pid file (``<qemu_pid_dir>/<name>.pid``) and
checked against the ``-uuid`` on its command line; without a usable pid
file, ``/proc`` is scanned for that uuid. Both roots are configurable so
the tests can hand in a fake tree, and so can a libvirtd that runs in
another mount namespace.

The thread names of a process never change once read, so they are cached
per process and only new thread ids cost a read.
"""

import os
import re

from rdt_virt.agent import model

_VCPU = re.compile(r'CPU ([0-9]+)/KVM')
_VHOST = re.compile(r'vhost-([0-9]+)')


def vcpu_of(comm):
    """The vCPU index QEMU named a thread after (``CPU 3/KVM``), or None.

    ``comm`` is the text of ``/proc/<pid>/task/<tid>/comm``: at most 15
    characters the guest's owner may influence (QEMU names its own threads,
    but any thread can rename itself), so anything else is simply not a
    vCPU.
    """
    match = _VCPU.fullmatch(comm.strip())
    if not match or len(match.group(1)) > 5:
        return None
    return int(match.group(1))


def _read(path, binary=False):
    try:
        with open(path, 'rb' if binary else 'r') as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError,
            PermissionError):
        return None


class ProcFS(object):
    """Finds QEMU processes and classifies their threads.

    :param proc_root: the procfs mount (``[rdt_agent] proc_root``).
    :param pid_dir: libvirt's QEMU pid file directory, or None.
    """

    def __init__(self, proc_root='/proc', pid_dir=None):
        self.proc_root = proc_root
        self.pid_dir = pid_dir
        self._pids = {}         # uuid -> pid
        self._names = {}        # pid -> {tid: vcpu index or None}
        # pid -> (tid list as listed, Threads): a converged host lists the
        # same threads every tick, and the same Threads object lets the
        # reconciliation reuse what it derived from it.
        self._last = {}
        self._task_dirs = {}    # pid -> its task directory's path

    def _matches(self, pid, uuid):
        cmdline = _read(os.path.join(self.proc_root, str(pid), 'cmdline'),
                        binary=True)
        if not cmdline:
            return False
        args = cmdline.split(b'\0')
        try:
            return args[args.index(b'-uuid') + 1].decode().lower() == (
                uuid.lower())
        except (ValueError, IndexError):
            return False

    def find_pid(self, uuid, name=None):
        """The pid of the QEMU process of domain ``uuid``, or None."""
        pid = self._pids.get(uuid)
        if pid is not None and os.path.isdir(
                os.path.join(self.proc_root, str(pid), 'task')):
            return pid
        self._pids.pop(uuid, None)
        pid = None
        if self.pid_dir and name and '/' not in name:
            text = _read(os.path.join(self.pid_dir, name + '.pid'))
            if text and text.strip().isdigit() and self._matches(
                    int(text.strip()), uuid):
                pid = int(text.strip())
        if pid is None:
            pid = self._scan(uuid)
        if pid is not None:
            self._pids[uuid] = pid
        return pid

    def _scan(self, uuid):
        try:
            entries = os.listdir(self.proc_root)
        except OSError:
            return None
        for entry in entries:
            if entry.isdigit() and self._matches(int(entry), uuid):
                return int(entry)
        return None

    def forget(self, uuid):
        """Drop what is cached about a domain (it stopped or restarted)."""
        pid = self._pids.pop(uuid, None)
        if pid is not None:
            self._names.pop(pid, None)
            self._last.pop(pid, None)
            self._task_dirs.pop(pid, None)

    def threads(self, pid):
        """The :class:`~rdt_virt.agent.model.Threads` of ``pid``.

        None when the process is gone.
        """
        task_dir = self._task_dirs.get(pid)
        if task_dir is None:
            task_dir = self._task_dirs[pid] = os.path.join(
                self.proc_root, str(pid), 'task')
        try:
            listed = os.listdir(task_dir)
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            self._names.pop(pid, None)
            self._last.pop(pid, None)
            self._task_dirs.pop(pid, None)
            return None
        last = self._last.get(pid)
        if last is not None and last[0] == listed:
            return last[1]
        tids = [int(t) for t in listed if t.isdigit()]
        known = self._names.setdefault(pid, {})
        live = set(tids)
        for tid in list(known):
            if tid not in live:
                del known[tid]
        for tid in tids:
            if tid in known:
                continue
            comm = _read(os.path.join(task_dir, str(tid), 'comm'))
            if comm is None:
                continue
            known[tid] = vcpu_of(comm)
        vcpus = {}
        others = []
        for tid, vcpu in known.items():
            if vcpu is None:
                others.append(tid)
            else:
                vcpus[vcpu] = tid
        found = model.Threads(pid=pid, vcpus=vcpus, others=tuple(sorted(
            others)))
        if len(known) == len(tids):
            # Every listed thread was classified (none vanished before its
            # comm was read): the same listing gives the same answer.
            self._last[pid] = (listed, found)
        else:
            self._last.pop(pid, None)
        return found

    def runnable_ns(self, pid, tid):
        """Nanoseconds thread ``tid`` of ``pid`` has run or waited to run.

        The first two fields of ``schedstat``: time on a CPU and time
        runnable on a run queue. Their sum grows at one second per second
        while the thread wants a CPU, whether it gets one or not, which is
        what the bandwidth controller reads as demand. None when the
        thread is gone or the kernel keeps no such figures.
        """
        text = _read(os.path.join(self.proc_root, str(pid), 'task',
                                  str(tid), 'schedstat'))
        fields = (text or '').split()
        try:
            return int(fields[0]) + int(fields[1])
        except (IndexError, ValueError):
            return None

    def boot_id(self):
        """This boot's id (``sys/kernel/random/boot_id``); None if unread."""
        text = _read(os.path.join(self.proc_root, 'sys', 'kernel', 'random',
                                  'boot_id'))
        return text.strip() if text else None

    def vhost_threads(self):
        """``{qemu pid: [tid, ...]}`` of vhost kernel threads.

        Before Linux 6.4 vhost workers are kernel threads named
        ``vhost-<owner pid>`` outside the QEMU process; this scans
        ``/proc`` for them, so it runs only when extra threads are placed.
        """
        found = {}
        try:
            entries = os.listdir(self.proc_root)
        except OSError:
            return found
        for entry in entries:
            if not entry.isdigit():
                continue
            comm = _read(os.path.join(self.proc_root, entry, 'comm'))
            match = _VHOST.fullmatch(comm.strip()) if comm else None
            if match:
                found.setdefault(int(match.group(1)), []).append(int(entry))
        return found

    def instance_threads(self, uuid, name=None):
        """Find the QEMU process of ``uuid`` and return its Threads."""
        pid = self._pids.get(uuid)
        if pid is not None:
            # Listing the known process's threads also tells whether it
            # is still there: no separate look at its task directory.
            found = self.threads(pid)
            if found is not None:
                return found
            self.forget(uuid)
        pid = self.find_pid(uuid, name)
        if pid is None:
            return None
        found = self.threads(pid)
        if found is None:
            self.forget(uuid)
        return found
