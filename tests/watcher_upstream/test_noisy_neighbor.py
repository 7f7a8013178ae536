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

"""Watcher's upstream ``noisy_neighbor`` strategy on rdt-virt's meter.

Its own cloud and at least 14 minutes of real ``cpu_l3_cache`` measures
(the strategy's fixed 300 s granularity), so it runs in its own target,
``tox -e watcher-upstream``, not in CI's. The step is
:func:`rdt_virt.cloud.flow_upstream.run`: the strategy's plan is applied
and checked, or its absence is explained from Watcher's own code.
"""

from rdt_virt.cloud import flow_upstream
from tests.cloud import base


class TestUpstreamNoisyNeighbor(base.CloudTestCase):

    def test_1_images(self):
        self.run_step(self.flow.flavors_and_images)

    def test_2_audit_on_cpu_l3_cache(self):
        self.run_step(lambda: flow_upstream.run(self.flow))
