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

"""The test cloud's nova-compute configuration."""

import configparser
import inspect
import os

import fixtures

from rdt_virt.cloud import process
from rdt_virt.cloud import services
from tests import base


class TestNovaCompute(base.TestCase):

    def test_sigterm_stops_nova_compute_before_the_cloud_kills_it(self):
        # Nova 34's nova-compute only leaves its graceful shutdown when a
        # timeout gives up on its libvirt connection-event loop (see
        # services.nova_compute): those timeouts must end before
        # Daemons.stop sends SIGKILL.
        tmp = self.useFixture(fixtures.TempDir()).path
        layout = services.Layout(tmp, ports={})
        os.makedirs(layout.etc('nova'))
        with open(layout.etc('nova', 'nova.conf'), 'w') as f:
            f.write('[DEFAULT]\ndebug = True\n')
        path = services.nova_compute(layout, 'compute1',
                                     os.path.join(tmp, 'sandbox'))
        conf = configparser.ConfigParser()
        conf.read(path)
        manager = conf.getint('DEFAULT', 'manager_shutdown_timeout')
        graceful = conf.getint('DEFAULT', 'graceful_shutdown_timeout')
        kill_after = inspect.signature(process.Daemons.stop).parameters[
            'timeout'].default
        # The RPC servers' stop follows the manager's step (10 s, as Nova
        # leaves when it caps the manager's share); oslo.service's alarm
        # ends the process at graceful.
        self.assertLessEqual(manager, graceful - 10)
        self.assertLess(graceful, kill_after)
        self.assertEqual('compute1', conf.get('DEFAULT', 'host'))
