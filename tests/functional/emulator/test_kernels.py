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

"""Kernel releases through real system calls, on the test matrix."""

import errno
import os
import subprocess
import sys
import time

import testscenarios

from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kernels
from tests.functional.emulator import base
from tests.functional import matrix


class KernelMatrixTest(testscenarios.WithScenarios, base.EmulatorTestCase):

    scenarios = matrix.scenarios()

    def setUp(self):
        super().setUp()
        self.features = kernels.get_kernel(self.kernel).features

    def test_reports_its_kernel(self):
        status = self.client.status()
        self.assertEqual(self.kernel, status['kernel'])
        self.assertEqual(self.profile, status['profile'])

    def test_rename_and_tasks(self):
        os.mkdir(self.path('g1'))
        os.mkdir(self.path('g1', 'mon_groups', 'm1'))
        old = self.path('g1', 'mon_groups', 'm1')
        new = self.path('mon_groups', 'm1')
        if 'mon_rename' in self.features:
            os.rename(old, new)
            self.assertEqual(['m1'], os.listdir(self.path('mon_groups')))
        else:
            self.assertErrno(errno.EPERM, os.rename, old, new)
            self.assertEqual(['m1'], os.listdir(self.path('g1',
                                                          'mon_groups')))
        a = self.spawn('import time\ntime.sleep(60)')
        b = self.spawn('import time\ntime.sleep(60)')
        ids = '%d,%d\n' % (a.pid, b.pid)
        if 'multi_tasks' in self.features:
            self.write('g1/tasks', ids)
        else:
            self.assertEqual('ok\n', self.assertErrno(
                errno.EINVAL, self.write, 'g1/tasks', ids))
            self.write('g1/tasks', '%d\n' % a.pid)
            self.write('g1/tasks', '%d\n' % b.pid)
        self.assertEqual({a.pid, b.pid},
                         {int(t) for t in self.read('g1', 'tasks').split()})


class PresetMountTest(base.EmulatorTestCase):
    """Presets and a captured tree through real mounts."""

    def mount(self, **kwargs):
        return self.useFixture(base.EmulatorFixture(**kwargs)).mountpoint

    def test_reference_stock_and_captured_tree(self):
        stock = self.mount(profile='reference', cmdline='')
        self.assertEqual(['L3_MON', 'MB', 'last_cmd_status'],
                         sorted(os.listdir(os.path.join(stock, 'info'))))
        tree = os.path.join(self.useFixture(
            base.fixtures.TempDir()).path, 'zen5')
        fromtree.render('amd-zen5', tree)
        root = self.mount(from_tree=tree)
        with open(os.path.join(root, 'info', 'L3_MON',
                               'mbm_assign_mode')) as f:
            self.assertEqual('[mbm_event]\ndefault\n', f.read())
        with open(os.path.join(root, 'schemata')) as f:
            self.assertIn('SMBA:0=2048;1=2048', f.read())
        os.mkdir(os.path.join(root, 'g1'))
        self.assertIn('mbm_L3_assignments',
                      os.listdir(os.path.join(root, 'g1')))


CLONE = '''
import os, subprocess, sys, threading, time
ready, go = sys.argv[1], sys.argv[2]

def worker():
    with open(ready + '.tmp', 'w') as f:
        f.write(str(threading.get_native_id()))
    os.rename(ready + '.tmp', ready)
    while not os.path.exists(go):
        time.sleep(0.02)
    child = subprocess.Popen([sys.executable, '-c',
                              'import time; time.sleep(60)'])
    with open(go + '.pid', 'w') as f:
        f.write(str(child.pid))
    child.wait()

threading.Thread(target=worker, daemon=True).start()
time.sleep(60)
'''


class CloneTest(base.EmulatorTestCase):

    def test_child_joins_the_group_of_the_forking_thread(self):
        tmp = self.useFixture(base.fixtures.TempDir()).path
        ready, go = os.path.join(tmp, 'ready'), os.path.join(tmp, 'go')
        proc = subprocess.Popen([sys.executable, '-c', CLONE, ready, go])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.wait_file(ready)
        with open(ready) as f:
            tid = int(f.read())
        os.mkdir(self.path('g1'))
        self.write('g1/tasks', '%d\n' % tid)
        open(go, 'w').close()
        self.wait_file(go + '.pid')
        with open(go + '.pid') as f:
            child = int(f.read())
        self.addCleanup(lambda: os.kill(child, 9))
        tasks = {int(t) for t in self.read('g1', 'tasks').split()}
        # The forking thread and its child; not the main thread.
        self.assertIn(tid, tasks)
        self.assertIn(child, tasks)
        self.assertNotIn(proc.pid, tasks)

    def wait_file(self, path, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            self.assertLess(time.monotonic(), deadline, path)
            time.sleep(0.02)
