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

"""MB throttles slow real threads down (emulator mounted --mba-effect)."""

import os
import subprocess
import sys
import time

from rdt_virt.emulator import enforce
from rdt_virt.emulator import threads
from tests.functional.emulator import base

BUSY = 'while True: pass'


def _cpu_seconds(pid):
    with open('/proc/%d/stat' % pid) as f:
        return threads.parse_stat(f.read())[1] / 1e9


def _cgroup(pid):
    with open('/proc/%d/cgroup' % pid) as f:
        for line in f.read().splitlines():
            idx, ctrl, path = line.split(':', 2)
            if 'cpu' in ctrl.split(','):
                return path
    return None


class TestMbaEffect(base.EmulatorTestCase):

    mount_kwargs = {'mba_effect': True}

    def setUp(self):
        backend, reason = enforce.probe()
        self.require(backend is not None and backend.version == 1,
                     reason or 'cgroup v2: covered by unit tests only')
        super().setUp()

    def busy(self):
        proc = subprocess.Popen([sys.executable, '-c', BUSY])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc.pid

    def wait_for(self, what, check, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail('%s within %ss' % (what, timeout))
            time.sleep(0.1)

    def test_throttled_thread_runs_at_most_its_share(self):
        pid = self.busy()
        home = _cgroup(pid)
        os.mkdir(self.path('g'))
        self.write('g/schemata', 'MB:0=20;1=20\n')
        self.write('g/tasks', str(pid))
        mine = enforce.PREFIX + str(pid)
        self.wait_for('the thread in its cgroup',
                      lambda: _cgroup(pid).endswith('/' + mine))
        status = self.client.status()['mba_effect']
        self.assertEqual('cgroup-v1', status['backend'])
        self.assertEqual(20000, status['threads'][str(pid)]['quota_us'])
        # The quota is a hard cap, whatever else runs on the machine.
        b0, c0, t0 = self.traffic(), _cpu_seconds(pid), time.monotonic()
        time.sleep(3)
        b1, c1, t1 = self.traffic(), _cpu_seconds(pid), time.monotonic()
        self.assertLess((c1 - c0) / (t1 - t0), 0.2 * 1.25)
        self.assertGreater(c1 - c0, 0)
        # The counters follow that CPU time, with no factor of their own:
        # 2 GiB per CPU-second on this profile (CPU time is counted in
        # 10 ms ticks).
        gib = 1024 ** 3
        self.assertLess(abs((b1 - b0) - (c1 - c0) * 2 * gib),
                        0.1 * (c1 - c0) * 2 * gib + 0.03 * 2 * gib)
        # Back to the default group: back to its own cgroup, ours removed.
        self.write('tasks', str(pid))
        self.wait_for('the thread back home', lambda: _cgroup(pid) == home)
        self.wait_for('the cgroup removed', lambda: not os.path.exists(
            os.path.join('/sys/fs/cgroup/cpu', home.lstrip('/'), mine)))

    def traffic(self):
        total = 0
        for dom in (0, 1):
            text = self.read('g', 'mon_data', 'mon_L3_%02d' % dom,
                             'mbm_total_bytes').strip()
            # A domain the thread never ran on has no value yet.
            total += 0 if text == 'Unavailable' else int(text)
        return total
