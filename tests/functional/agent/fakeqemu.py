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

"""Stand-ins for QEMU processes and libvirt, for tests without libvirtd.

The emulated resctrl only accepts thread ids that exist, so the vCPUs must
be real threads. :class:`ThreadPool` runs one helper process whose threads
stand in for every vCPU (hundreds of guests cost one process), and
:class:`FakeHost` lays out a procfs tree (the agent's ``proc_root``) that
groups those threads into "QEMU processes", one per instance, with
``-uuid`` on their command line and ``CPU n/KVM`` thread names.
:class:`FakeSource` plays libvirt for the agent: a dict of instances and an
event queue.
"""

import os
import shutil
import subprocess
import sys
import time

from rdt_virt.agent import domains
from rdt_virt.agent import model
from rdt_virt import concurrency

_HELPER = r'''
import os, sys, threading
stops = {}
lock = threading.Lock()
def run(ready, stop, out, burn):
    out.append(threading.get_native_id())
    ready.set()
    if burn:
        x = 0
        while not stop.is_set():
            for _ in range(20000):
                x += 1
    else:
        stop.wait()
for line in sys.stdin:
    words = line.split()
    if words[0] == 'spawn':
        tids = []
        for _ in range(int(words[1])):
            ready, stop, out = threading.Event(), threading.Event(), []
            t = threading.Thread(target=run, args=(ready, stop, out,
                                 len(words) > 2), daemon=True)
            t.start()
            ready.wait()
            stops[out[0]] = stop
            tids.append(out[0])
        print(' '.join(map(str, tids)), flush=True)
    elif words[0] == 'stop':
        for tid in map(int, words[1:]):
            stops.pop(tid).set()
        print('ok', flush=True)
'''


class ThreadPool(object):
    """Real idle (or busy) threads in one helper process."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, '-c', _HELPER], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, bufsize=1)

    def spawn(self, count, burn=False):
        self.proc.stdin.write('spawn %d%s\n' % (count,
                                                ' burn' if burn else ''))
        return [int(t) for t in self.proc.stdout.readline().split()]

    def stop(self, tids):
        if not tids:
            return
        self.proc.stdin.write('stop %s\n' % ' '.join(map(str, tids)))
        self.proc.stdout.readline()
        # Let the threads exit before anyone lists them.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(
                os.path.exists('/proc/%d/task/%d' % (self.proc.pid, t))
                for t in tids):
            time.sleep(0.01)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.kill()
            self.proc.wait()


class FakeHost(object):
    """QEMU-like processes in a fake procfs tree over real threads.

    :param proc_root: directory to lay the fake procfs out in.
    """

    def __init__(self, proc_root, pool=None):
        self.proc_root = proc_root
        os.makedirs(proc_root, exist_ok=True)
        # This boot's id, as the real procfs has it.
        random_dir = os.path.join(proc_root, 'sys', 'kernel', 'random')
        os.makedirs(random_dir, exist_ok=True)
        shutil.copyfile('/proc/sys/kernel/random/boot_id',
                        os.path.join(random_dir, 'boot_id'))
        self.pool = pool or ThreadPool()
        self.procs = {}     # uuid -> (pid, {vcpu: tid}, [other tids])

    def start(self, uuid, vcpus=2, others=1, burn=False):
        """Start a fake QEMU for ``uuid``; returns its model.Threads."""
        tids = self.pool.spawn(vcpus + others, burn)
        pid = tids[0]
        vcpu_tids = dict(enumerate(tids[others:] if others else tids))
        other_tids = tids[:others]
        base = os.path.join(self.proc_root, str(pid))
        os.makedirs(os.path.join(base, 'task'))
        with open(os.path.join(base, 'cmdline'), 'wb') as f:
            f.write(b'qemu-system-x86_64\0-uuid\0%s\0' % uuid.encode())
        for tid in other_tids:
            self._thread(base, tid, 'qemu-system-x86')
        for vcpu, tid in vcpu_tids.items():
            self._thread(base, tid, 'CPU %d/KVM' % vcpu)
        self.procs[uuid] = (pid, vcpu_tids, other_tids)
        return model.Threads(pid, vcpu_tids, tuple(other_tids))

    def _thread(self, base, tid, comm):
        path = os.path.join(base, 'task', str(tid))
        os.makedirs(path)
        with open(os.path.join(path, 'comm'), 'w') as f:
            f.write(comm + '\n')
        # The real thread's run and wait times: the controller's demand.
        os.symlink('/proc/%d/task/%d/schedstat' % (self.pool.proc.pid, tid),
                   os.path.join(path, 'schedstat'))

    def hotplug(self, uuid):
        """Add one vCPU thread to a running fake QEMU; returns its tid."""
        pid, vcpus, others = self.procs[uuid]
        tid = self.pool.spawn(1)[0]
        index = max(vcpus) + 1 if vcpus else 0
        vcpus[index] = tid
        self._thread(os.path.join(self.proc_root, str(pid)), tid,
                     'CPU %d/KVM' % index)
        return tid

    def stop(self, uuid):
        pid, vcpus, others = self.procs.pop(uuid)
        shutil.rmtree(os.path.join(self.proc_root, str(pid)))
        self.pool.stop(list(vcpus.values()) + list(others))

    def tids(self, uuid):
        pid, vcpus, others = self.procs[uuid]
        return set(vcpus.values()) | set(others)

    def vcpu_tids(self, uuid):
        return set(self.procs[uuid][1].values())

    def close(self):
        for uuid in list(self.procs):
            try:
                self.stop(uuid)
            except Exception:
                pass
        self.pool.close()


class FakeSource(object):
    """libvirt as far as the agent is concerned: instances and events."""

    #: libvirt's host capabilities: by default no NUMA topology, so each
    #: L3 domain is a memory bandwidth pool of its own.
    CAPABILITIES = '<capabilities><host/></capabilities>'

    def __init__(self, capabilities=CAPABILITIES):
        self.domains = {}
        self.events = concurrency.native('queue').Queue()
        self.connected = True
        self.capabilities_xml = capabilities

    def connect(self):
        self.connected = True

    def capabilities(self):
        return self.capabilities_xml

    def instances(self):
        return dict(self.domains)

    def instance(self, uuid):
        return self.domains.get(uuid)

    def start(self, inst, event=True):
        self.domains[inst.uuid] = inst
        if event:
            self.events.put(domains.Event(domains.STARTED, inst.uuid,
                                          time.monotonic()))

    def stop(self, uuid, event=True):
        self.domains.pop(uuid, None)
        if event:
            self.events.put(domains.Event(domains.STOPPED, uuid,
                                          time.monotonic()))
