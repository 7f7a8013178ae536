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

"""rdt-virt's library in a process that eventlet runs, as nova-compute is
on Nova 31 to 33.

Each case runs in a fresh interpreter that monkey-patches first, as
nova-compute does (the test runner itself may or may not be patched,
depending on the Nova release installed).
"""

import os
import subprocess
import sys
import tempfile

from tests import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# Two green threads of one process take the resctrl lock, each through its
# own Resctrl (its own fd, as the driver's threads have): the second must
# wait for the first, and the first must be able to run meanwhile.
_CONTENDED = '''
import eventlet
eventlet.monkey_patch()
import sys, time
from rdt_virt.resctrl import fs
first, second = fs.Resctrl(sys.argv[1]), fs.Resctrl(sys.argv[1])
order = []
def contender():
    with second.lock():
        order.append('second')
with first.lock():
    thread = eventlet.spawn(contender)
    eventlet.sleep(0.3)
    order.append('first')
thread.wait()
print(','.join(order))
'''

# The agent's loop runs on a real thread in a patched process (the
# functional tests' runner is patched): its resctrl lock is taken there
# first, then by a green thread of the main one. Both must get it.
_NATIVE_FIRST = '''
import eventlet
eventlet.monkey_patch()
import sys
from eventlet import patcher
from rdt_virt.resctrl import fs
threading = patcher.original('threading')
res = fs.Resctrl(sys.argv[1])
done = []
def take(who):
    with res.lock():
        done.append(who)
thread = threading.Thread(target=take, args=('native',), daemon=True)
thread.start()
thread.join(10)
eventlet.spawn(take, 'green').wait()
take('main')
print(','.join(done))
'''


class TestUnderEventlet(base.TestCase):

    def run_patched(self, code, *args, timeout=30):
        try:
            out = subprocess.run(
                [sys.executable, '-c', code] + list(args), cwd=ROOT,
                capture_output=True, text=True, timeout=timeout,
                env=dict(os.environ, PYTHONPATH=ROOT))
        except subprocess.TimeoutExpired:
            self.fail('the patched process hung for %d s' % timeout)
        self.assertEqual(0, out.returncode, out.stderr)
        return out.stdout.strip()

    def test_a_contended_resctrl_lock_stops_no_green_thread(self):
        # Without concurrency.blocking the second flock stops the only OS
        # thread while the first holder waits to be scheduled: a deadlock.
        root = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, root)
        self.assertEqual('first,second', self.run_patched(_CONTENDED, root))

    def test_a_real_thread_takes_the_lock_without_the_hub(self):
        # With the pool's answer bound to the hub of the thread that first
        # used it, the real thread waited forever, and so did every later
        # green caller.
        root = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, root)
        self.assertEqual('native,green,main',
                         self.run_patched(_NATIVE_FIRST, root, timeout=20))

    def test_native_modules_under_eventlet(self):
        out = self.run_patched(
            'import eventlet; eventlet.monkey_patch()\n'
            'import threading\n'
            'from rdt_virt import concurrency\n'
            'print(concurrency.patched(),'
            ' concurrency.native("threading").Lock is threading.Lock)\n')
        self.assertEqual('True False', out)

    def test_unpatched_process(self):
        out = self.run_patched(
            'import threading\n'
            'from rdt_virt import concurrency\n'
            'print(concurrency.patched(),'
            ' concurrency.native("threading") is threading,'
            ' concurrency.blocking(max, 2, 3))\n')
        self.assertEqual('False True 3', out)
