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

import testtools

from rdt_virt.agent import pools


def caps_xml(banks, cells):
    """libvirt capabilities with L3 ``banks`` and NUMA ``cells``."""
    bank_xml = ''.join(
        "<bank id='%d' level='%d' type='both' size='32' unit='MiB' "
        "cpus='%s'/>" % (i, level, cpus) for i, level, cpus in banks)
    cell_xml = ''.join(
        "<cell id='%d'><cpus num='%d'>%s</cpus></cell>" % (
            i, len(cpus), ''.join("<cpu id='%d' socket_id='0'/>" % c
                                  for c in cpus))
        for i, cpus in cells)
    return ('<capabilities><host><uuid>x</uuid><topology><cells num="%d">'
            '%s</cells></topology><cache>%s</cache></host></capabilities>'
            % (len(cells), cell_xml, bank_xml))


class TestPools(testtools.TestCase):

    def test_two_sockets_one_pool_each(self):
        # Intel without SNC: one L3 and one node per socket.
        text = caps_xml([(0, 3, '0-3'), (1, 3, '4-7'), (0, 2, '0')],
                        [(0, range(0, 4)), (1, range(4, 8))])
        self.assertEqual({0: 0, 1: 1}, pools.from_capabilities(text))

    def test_ccxs_of_one_node_share_a_pool(self):
        # AMD EPYC, NPS1: four CCXs (L3 domains) per socket node.
        text = caps_xml([(i, 3, '%d-%d' % (4 * i, 4 * i + 3))
                         for i in range(8)],
                        [(0, range(0, 16)), (1, range(16, 32))])
        self.assertEqual({0: 0, 1: 0, 2: 0, 3: 0, 4: 4, 5: 4, 6: 4, 7: 4},
                         pools.from_capabilities(text))

    def test_domains_linked_through_a_chain_of_nodes(self):
        # Domain 1 spans nodes 0 and 1 (Sub-NUMA Clustering): 0, 1 and 2
        # are one pool; 3 has memory of its own.
        text = caps_xml([(0, 3, '0-1'), (1, 3, '2-5'), (2, 3, '6-7'),
                         (3, 3, '8-9')],
                        [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 7]), (2, [8, 9])])
        self.assertEqual({0: 0, 1: 0, 2: 0, 3: 3},
                         pools.from_capabilities(text))

    def test_no_topology_each_domain_alone(self):
        text = caps_xml([(0, 3, '0'), (1, 3, '1')], [])
        self.assertEqual({0: 0, 1: 1}, pools.from_capabilities(text))
        self.assertEqual({}, pools.from_capabilities(
            '<capabilities><host/></capabilities>'))

    def test_bad_capabilities(self):
        for text in ('<capabilities/>', 'not xml',
                     caps_xml([(0, 3, 'x')], [])):
            pool_of, reason = pools.read(_Source(text))
            self.assertIsNone(pool_of)
            self.assertIn('host capabilities', reason)

    def test_read_says_why_libvirt_failed(self):
        pool_of, reason = pools.read(_Source(RuntimeError('gone')))
        self.assertIsNone(pool_of)
        self.assertEqual('cannot read the host capabilities: gone', reason)

    def test_merge_and_members(self):
        pool_of = {0: 0, 1: 0, 2: 2}
        self.assertEqual({0: 5.0, 2: 1.0, 7: 2.0},
                         pools.merge({0: 2.0, 1: 3.0, 2: 1.0, 7: 2.0},
                                     pool_of))
        self.assertIsNone(pools.merge(None, pool_of))
        self.assertEqual({0: (0, 1), 2: (2,)}, pools.members(pool_of))


class _Source(object):

    def __init__(self, answer):
        self.answer = answer

    def capabilities(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer
