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

"""The flow's summary says where its time went, step by step."""

from unittest import mock

from rdt_virt.cloud import flow as flow_mod
from tests import base


class TestSummary(base.TestCase):

    def test_each_step_and_the_total(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        lines = []
        flow.out, flow.times = lines.append, []
        clock = iter([10.0, 12.5, 20.0, 81.0])
        with mock.patch.object(flow_mod.time, 'monotonic',
                               lambda: next(clock)):
            flow.step('Short', lambda: None)
            flow.step('A longer step', lambda: None)
        flow.summary()
        table = lines[lines.index('\n== Time per step ==') + 1:]
        self.assertEqual(['  Short             2 s',
                          '  A longer step    61 s',
                          '  flow             64 s'], table)

    def test_a_failed_step_is_not_counted(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        flow.out, flow.times = lambda line: None, []

        def fails():
            raise flow_mod.FlowError('no')
        self.assertRaises(flow_mod.FlowError, flow.step, 'Fails', fails)
        self.assertEqual([], flow.times)
