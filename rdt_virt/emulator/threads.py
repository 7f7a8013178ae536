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

"""Threads of the host, as the emulated kernel sees them.

The model never touches ``/proc`` itself; it asks a thread source, so unit
tests can hand it fake threads. A source has three methods:

``snapshot()``
    ``{tid: ThreadSample}`` for every live thread (``uid``/``suid`` may be
    None there).
``tids()``
    ``{tid: tgid}`` for every live thread, cheaply (no per-thread files).
``lookup(tid)``
    one :class:`ThreadSample` with ``uid``/``suid``, or None when no such
    thread exists (it exited, or never did).
``creator(tid, tgid)`` (optional)
    the thread that created *tid*, of process *tgid*, when known, else
    None.

:class:`ProcThreads` reads them from ``/proc``: a thread's CPU time is
``utime + stime`` of ``/proc/<pid>/task/<tid>/stat`` and its CPU the
``processor`` field (the CPU it last ran on).
"""

import collections
import os

ThreadSample = collections.namedtuple(
    'ThreadSample', 'tid tgid ppid cpu_ns cpu uid suid')

_CLK_TCK = os.sysconf('SC_CLK_TCK')


def parse_stat(text):
    """``(ppid, cpu_ns, cpu)`` from the text of a ``stat`` file."""
    # The command name may hold spaces and parentheses: split after it.
    fields = text[text.rindex(')') + 2:].split()
    ppid = int(fields[1])
    ticks = int(fields[11]) + int(fields[12])
    cpu = int(fields[36])
    return ppid, ticks * 1000000000 // _CLK_TCK, cpu


class ProcThreads(object):
    """Thread source backed by a procfs tree (``/proc`` by default)."""

    def __init__(self, proc='/proc'):
        self.proc = proc

    def _read(self, path):
        try:
            with open(path) as f:
                return f.read()
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            return None

    def _listing(self):
        """``(pid, tid)`` text pairs of every live thread."""
        try:
            pids = [p for p in os.listdir(self.proc) if p.isdigit()]
        except FileNotFoundError:
            return
        for pid in pids:
            try:
                tids = os.listdir(os.path.join(self.proc, pid, 'task'))
            except (FileNotFoundError, ProcessLookupError,
                    NotADirectoryError):
                continue        # exited since the listing
            for tid in tids:
                yield pid, tid

    def snapshot(self):
        out = {}
        for pid, tid in self._listing():
            text = self._read(os.path.join(self.proc, pid, 'task', tid,
                                           'stat'))
            if not text:
                continue
            try:
                ppid, cpu_ns, cpu = parse_stat(text)
            except (ValueError, IndexError):
                continue
            out[int(tid)] = ThreadSample(int(tid), int(pid), ppid, cpu_ns,
                                         cpu, None, None)
        return out

    def tids(self):
        return {int(tid): int(pid) for pid, tid in self._listing()}

    def creator(self, tid, tgid):
        """For a process, the thread of its parent that forked it.

        ``/proc/PPID/task/TID/children`` lists the processes each thread
        created. A new thread's creator is not visible in ``/proc``: for
        a thread that is not its process's leader the answer is None at
        once, without a ``children`` file read per thread of the parent
        that could never name it.
        """
        if tgid != tid:
            return None
        stat = self._read(os.path.join(self.proc, str(tid), 'stat'))
        if not stat:
            return None
        try:
            ppid = parse_stat(stat)[0]
            tasks = os.listdir(os.path.join(self.proc, str(ppid), 'task'))
        except (ValueError, IndexError, OSError):
            return None
        if len(tasks) < 2:
            return None       # a single-threaded parent: nothing to learn
        for task in tasks:
            children = self._read(os.path.join(
                self.proc, str(ppid), 'task', task, 'children')) or ''
            if str(tid) in children.split():
                return int(task)
        return None

    def lookup(self, tid):
        # /proc/<tid> resolves any thread id, listed or not.
        base = os.path.join(self.proc, str(tid))
        status = self._read(os.path.join(base, 'status'))
        stat = self._read(os.path.join(base, 'stat'))
        if not status or not stat:
            return None
        fields = {}
        for line in status.splitlines():
            key, _, val = line.partition(':')
            fields[key] = val.split()
        try:
            ppid, cpu_ns, cpu = parse_stat(stat)
            uids = [int(u) for u in fields['Uid']]
            tgid = int(fields['Tgid'][0])
        except (KeyError, ValueError, IndexError):
            return None
        # Uid: real, effective, saved, filesystem.
        return ThreadSample(tid, tgid, ppid, cpu_ns, cpu, uids[0], uids[2])
