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

"""The operator's flow on a real cloud (``rdt-virt-sandbox cloud``).

The class brings the cloud up once (MariaDB, RabbitMQ, Keystone,
Placement, Glance, Neutron, Nova, Gnocchi, Ceilometer, two emulated RDT
hosts), each test runs one step of the flow in order (names sort in flow
order) and checks what a user checks, with the flow's own checks (a
step fails at the first): server states and hosts, the RDT fault of a
server no host can serve, the protected server's work growing in its
console log, Placement's CLOSID usages, one resctrl group
with its vCPU thread per server, Gnocchi's measures of the three meters,
the same meters on Ceilometer's and the agent's Prometheus exporters,
Prometheus scraping all four exporters behind Aetos, and two tenants'
members each seeing through Aetos (``openstack metric query``) the RDT
series of their own project's server and nothing of the other's, a
live migration with its claims, allocations, groups, agents, exported
series and Gnocchi measures checked on both hosts and one the scheduler
refuses, Watcher's services with rdt-virt's strategy and audits on
Gnocchi and through Aetos whose plans agree and whose action plan moves a
noisy low-priority server off the protected one's host, and usages,
groups and exported series back to zero after the deletion, servers of
a flavor without Placement keys booted one at a time until RDTFilter
refuses one with its reason and booted again right after their deletion,
a cold migration with confirm and a resize with revert to the other host
(disks copied over SSH) with groups, allocations and the RDT stat checked
on both hosts; then a high-priority server and low-priority ones, which
the agent's controller throttles to the floor, where Watcher's audit
moves one of them to the host without MBA, an agent stopped whose alert
fires and resolves once it is back, and the controller releasing the low
servers once the high one is paused. Needs root,
/dev/kvm, /dev/fuse, bindep's cloud profile and Gnocchi's environment
(``RDT_VIRT_GNOCCHI_BIN`` or ``.tox/gnocchi/bin``); the Prometheus and
Aetos steps need the metric client's (``RDT_VIRT_METRIC_CLIENT_BIN`` or
``.tox/metric-client/bin``). Run with ``tox -e cloud``.
"""

from rdt_virt.cloud import cloud as cloud_mod
from tests.cloud import base


class TestCloud(base.CloudTestCase):

    def test_1_cloud_is_up(self):
        rows = self.cloud.status()
        self.assertTrue(rows)
        self.assertEqual([], [r for r in rows if r[2] != 'up'])
        self.assertRaises(cloud_mod.CloudError, self.cloud.up)

    def test_2_flavors_images_and_bad_input(self):
        self.run_step(self.flow.flavors_and_images)
        self.run_step(self.flow.bad_input)

    def test_3_boot_and_placement(self):
        self.run_step(self.flow.boot)
        self.run_step(self.flow.placement)

    def test_3b_protected_server_reports_its_work(self):
        self.run_step(self.flow.protected_work)

    def test_4_resctrl_groups(self):
        self.run_step(self.flow.resctrl)

    def test_5_gnocchi_measures(self):
        self.run_step(self.flow.gnocchi)

    def test_5b_prometheus_exporters(self):
        self.run_step(self.flow.prometheus)

    def test_5c_prometheus_scrapes_every_exporter_behind_aetos(self):
        self.needs_metric_client()
        self.run_step(self.flow.prometheus_targets)

    def test_5d_each_tenant_sees_its_own_servers_through_aetos(self):
        self.needs_metric_client()
        self.run_step(self.flow.tenants)

    def test_6_resize_rebuild(self):
        self.run_step(self.flow.lifecycle)

    def test_6b_live_migration(self):
        self.run_step(self.flow.live_migration)

    def test_6c_watcher_runs_with_rdt_virts_strategy(self):
        self.run_step(self.flow.watcher_services)

    def test_6d_watcher_moves_a_noisy_neighbour(self):
        self.run_step(self.flow.watcher_loop)

    def test_6e_measures_of_the_live_migrated_server(self):
        self.run_step(self.flow.live_migration_measures)

    def test_7_delete_all(self):
        self.run_step(self.flow.delete_all)

    def test_7b_boots_and_deletes_in_quick_succession(self):
        self.run_step(self.flow.boots_and_deletes)

    def test_7c_cold_migration_and_resize_to_the_other_host(self):
        self.run_step(self.flow.cold_migration_and_resize)

    def test_8a_priority_classes_boot(self):
        self.run_step(self.flow.priority_boot)

    def test_8b_controller_throttles_the_low_servers(self):
        self.run_step(self.flow.priority_throttled)

    def test_8c_watcher_moves_a_low_server_held_at_the_floor(self):
        self.needs_metric_client()
        self.run_step(self.flow.priority_watcher)

    def test_8d_an_agent_stops_and_its_alert_is_pending(self):
        self.needs_metric_client()
        self.run_step(self.flow.alert_pending)

    def test_8e_pause_releases_the_low_servers(self):
        self.run_step(self.flow.priority_released)

    def test_8f_the_alert_fires_and_resolves(self):
        self.needs_metric_client()
        self.run_step(self.flow.alert_resolved)
