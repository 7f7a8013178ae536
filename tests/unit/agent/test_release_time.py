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

"""How long a release takes with the defaults, as admin/protection says.

The guide gives the figure an operator plans with; the controller's
defaults decide it. Computing the figure from the parameters the agent
builds out of its default options keeps the two together.
"""

import math
import os

from rdt_virt.agent import protection
from rdt_virt import conf as rdt_conf
from tests import base

DOC = os.path.join(os.path.dirname(base.FIXTURES_DIR), os.pardir, 'doc',
                   'source', 'admin', 'protection.rst')


class TestReleaseTime(base.TestCase):

    def test_documented_release_time_is_the_defaults(self):
        opts = rdt_conf.CONF.rdt_agent
        period = opts.controller_period or opts.sample_interval
        params = protection.params_from(opts, period)
        steps = math.ceil((100 - params.floor) / params.increase)
        with open(DOC) as f:
            text = ' '.join(f.read().split())
        self.assertIn('**%d steps of %g s: %g s**' % (
            steps, params.release_dwell, steps * params.release_dwell),
            text)
        self.assertIn('one or two samples (``sample_interval``, %g s)' %
                      opts.sample_interval, text)
