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

"""The test cloud's daemons, with real processes."""

import shutil
import time

import fixtures

from rdt_virt.cloud import process
from tests import base


SLEEP = shutil.which('sleep')


class TestDaemons(base.TestCase):

    def setUp(self):
        super().setUp()
        root = self.useFixture(fixtures.TempDir()).path
        self.daemons = process.Daemons(root + '/run', root + '/log')

    def test_a_started_daemon_reads_as_running_at_once(self):
        # Right after Popen returns, /proc shows no command line for a
        # few per cent of starts: a hundred starts meet that window.
        names = ['d%d' % i for i in range(100)]
        self.addCleanup(self.daemons.stop_all, names)
        down = []
        for name in names:
            pid = self.daemons.start(name, [SLEEP, '60'])
            if self.daemons.pid(name) != pid:
                down.append(name)
        self.assertEqual([], down)

    def test_a_daemon_that_exits_does_not_hold_up_start(self):
        # Its marker never shows: only its exit ends the wait early.
        started = time.monotonic()
        self.daemons.start('gone', [SLEEP, '0'], marker='not-sleep')
        self.assertLess(time.monotonic() - started, 5)
        self.assertIsNone(self.daemons.pid('gone'))

    def test_a_marker_that_never_shows_gives_up_after_the_timeout(self):
        # Unknown to the daemons, it cannot be stopped: it ends itself.
        started = time.monotonic()
        self.daemons.start('other', [SLEEP, '2'], marker='not-sleep',
                           timeout=0.5)
        self.assertGreaterEqual(time.monotonic() - started, 0.5)
        self.assertIsNone(self.daemons.pid('other'))
