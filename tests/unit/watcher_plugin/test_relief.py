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

"""The cloud loop's choice: which low-priority instance leaves a host."""

from tests import base
from watcher_plugin import relief

GB = 1.0e9


def inst(name, priority, bandwidth=None, host='compute1', level=None):
    return relief.Instance('uuid-' + name, name, host, priority, bandwidth,
                           level)


def anywhere(candidate):
    return True


class TestPriority(base.TestCase):

    def test_flavor_class_first(self):
        self.assertEqual('low', relief.priority_of(
            {'hw:rdt_priority': 'low'}, {'watcher-priority': 'high'}))

    def test_flavor_class_as_the_api_accepts_it(self):
        # Blanks and case, as the API's validator and the scheduler take
        # them (admin/extra-specs).
        for value in (' low', 'Low ', '\tLOW\n'):
            self.assertEqual('low', relief.priority_of(
                {'hw:rdt_priority': value}, {'watcher-priority': 'high'}),
                repr(value))

    def test_metadata_when_the_flavor_has_no_class(self):
        for value, expected in (('high', 'high'), ('LOW', 'low'),
                                ('1', 'high'), ('5', 'normal'),
                                ('9', 'low'), ('soon', 'normal')):
            self.assertEqual(expected, relief.priority_of(
                {'hw:cpu_policy': 'dedicated'},
                {'watcher-priority': value}), value)
        self.assertEqual('normal', relief.priority_of(None, None))
        # An unknown class in the flavor does not hide the metadata.
        self.assertEqual('high', relief.priority_of(
            {'hw:rdt_priority': 'urgent'}, {'watcher-priority': 'high'}))


class TestChoose(base.TestCase):

    def test_the_low_instance_that_relieves_most(self):
        instances = [inst('protected', 'high', 0.5 * GB),
                     inst('low-1', 'low', 0.6 * GB),
                     inst('low-2', 'low', 2.0 * GB),
                     inst('low-3', 'low', 1.0 * GB),
                     # A normal one uses more, but is not a candidate.
                     inst('normal', 'normal', 5.0 * GB)]
        moves, reasons = relief.choose(instances, anywhere, 3 * GB)
        self.assertEqual(['low-2'], [m.instance.name for m in moves])
        self.assertEqual('compute1', moves[0].source)
        self.assertEqual(2.0 * GB, moves[0].relief)
        self.assertIn('no published levels', reasons['compute1'])

    def test_one_move_per_host_that_needs_relief(self):
        instances = [inst('p1', 'high', 1, 'a'),
                     inst('l1', 'low', 2 * GB, 'a'),
                     inst('p2', 'high', 1, 'b'),
                     inst('l2', 'low', 0.1 * GB, 'b'),
                     inst('l3', 'low', 9 * GB, 'c')]
        moves, reasons = relief.choose(instances, anywhere, GB)
        self.assertEqual([('l1', 'a')],
                         [(m.instance.name, m.source) for m in moves])
        self.assertIn('under the threshold', reasons['b'])
        self.assertEqual('no high-priority instance', reasons['c'])

    def test_no_action_when_measures_are_missing(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB),
                     inst('low-2', 'low', None)]
        moves, reasons = relief.choose(instances, anywhere, GB)
        self.assertEqual([], moves)
        self.assertEqual('no measures of low-2', reasons['compute1'])

    def test_no_action_when_no_host_has_room(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB),
                     inst('low-2', 'low', 2 * GB)]
        moves, reasons = relief.choose(instances, lambda c: False, GB)
        self.assertEqual([], moves)
        self.assertEqual('no other host has room for low-1, low-2',
                         reasons['compute1'])

    def test_the_next_one_when_the_noisiest_fits_nowhere(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB),
                     inst('low-2', 'low', 2 * GB)]
        moves, _ = relief.choose(instances, lambda c: c.name != 'low-1', GB)
        self.assertEqual(['low-2'], [m.instance.name for m in moves])

    def test_classes_are_respected(self):
        # Neither a high nor a normal instance is ever moved, however much
        # it uses, and lows without a high beside them stay.
        instances = [inst('protected', 'high', 50 * GB),
                     inst('normal', 'normal', 50 * GB),
                     inst('other-high', 'high', 50 * GB)]
        self.assertEqual(([], {'compute1': 'no low-priority instance'}),
                         relief.choose(instances, anywhere, 0))
        instances = [inst('low-1', 'low', 50 * GB),
                     inst('normal', 'normal', 50 * GB)]
        self.assertEqual(([], {'compute1': 'no high-priority instance'}),
                         relief.choose(instances, anywhere, 0))

    def test_levels_above_the_floor_leave_it_to_the_host(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB, level=10),
                     inst('low-2', 'low', 2 * GB, level=40)]
        moves, reasons = relief.choose(instances, anywhere, GB, floor=10)
        self.assertEqual([], moves)
        self.assertIn('can still throttle low-2', reasons['compute1'])
        # All at the floor: the host loop can do no more.
        instances[2] = inst('low-2', 'low', 2 * GB, level=10)
        moves, reasons = relief.choose(instances, anywhere, GB, floor=10)
        self.assertEqual(['low-1'], [m.instance.name for m in moves])
        self.assertIn('all at the floor 10', reasons['compute1'])

    def test_a_level_that_could_not_be_read_leaves_the_host_alone(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB, level=10),
                     relief.Instance('uuid-low-2', 'low-2', 'compute1', 'low',
                                     2 * GB, None, 'the level')]
        moves, reasons = relief.choose(instances, anywhere, GB, floor=10)
        self.assertEqual([], moves)
        self.assertEqual('cannot read the level of low-2',
                         reasons['compute1'])

    def test_released_during_the_period_is_above_the_floor(self):
        instances = [inst('protected', 'high', GB),
                     inst('low-1', 'low', 9 * GB, level=10),
                     inst('low-2', 'low', 2 * GB, level=float('inf'))]
        moves, reasons = relief.choose(instances, anywhere, GB, floor=10)
        self.assertEqual([], moves)
        self.assertIn('can still throttle low-2', reasons['compute1'])


class TestPressure(base.TestCase):

    INSTANCES = [inst('protected', 'high', GB),
                 inst('low-1', 'low', 9 * GB, level=10),
                 inst('p2', 'high', GB, 'compute2'),
                 inst('l2', 'low', 9 * GB, 'compute2', level=10)]

    def test_hosts_with_a_high_beside_a_low(self):
        self.assertEqual(['compute1', 'compute2'],
                         relief.needs_relief(self.INSTANCES))
        self.assertEqual([], relief.needs_relief(self.INSTANCES[1:3]))

    def test_only_a_pressed_host_needs_relief(self):
        moves, reasons = relief.choose(
            self.INSTANCES, anywhere, GB, floor=10,
            pressures={'compute1': 0.97, 'compute2': 0.5},
            pressure_threshold=0.85)
        self.assertEqual([('low-1', 'compute1')],
                         [(m.instance.name, m.source) for m in moves])
        self.assertIn('all at the floor 10, pressure 0.97',
                      reasons['compute1'])
        self.assertEqual('memory bandwidth pressure 0.50 is under the '
                         'threshold 0.85', reasons['compute2'])

    def test_a_missing_pressure_leaves_the_host_alone(self):
        moves, reasons = relief.choose(
            self.INSTANCES, anywhere, GB, floor=10,
            pressures={'compute1': None, 'compute2': 0.9},
            pressure_threshold=0.85)
        self.assertEqual(['compute2'], [m.source for m in moves])
        self.assertEqual("no measure of the host's memory bandwidth "
                         "pressure", reasons['compute1'])

    def test_without_pressures_the_decision_does_without(self):
        moves, reasons = relief.choose(self.INSTANCES, anywhere, GB,
                                       floor=10)
        self.assertEqual(2, len(moves))
        self.assertNotIn('pressure', reasons['compute1'])
