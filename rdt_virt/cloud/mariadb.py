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

"""A private MariaDB server for the cloud's databases.

Debian's MariaDB runs a server of our own (data directory in the cloud
directory, a port on 127.0.0.1, its socket beside the data), so the
machine's own server, if any, is never touched. MariaDB rather than
PostgreSQL because Neutron's schema migrations are MySQL-only (one
``ALTER TABLE ... CONVERT TO CHARACTER SET utf8mb4``, run for every
backend, is a syntax error on PostgreSQL); DevStack's default is MySQL too.
"""

import os
import subprocess

from rdt_virt.cloud import process

USER = 'rdtvirt'
PASSWORD = 'rdt-virt'


class Server(object):

    NAME = 'mariadb'

    def __init__(self, daemons, data_dir, port):
        self.daemons = daemons
        self.data_dir = data_dir
        self.port = port

    @property
    def socket(self):
        return self.data_dir + '.sock'

    def url(self, database):
        return 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8' % (
            USER, PASSWORD, self.port, database)

    def start(self):
        log = self.daemons.log_file(self.NAME)
        os.makedirs(self.daemons.log_dir, exist_ok=True)
        fresh = not os.path.isdir(os.path.join(self.data_dir, 'mysql'))
        if fresh:
            os.makedirs(self.data_dir, exist_ok=True)
            process.run(['mariadb-install-db', '--no-defaults',
                         '--user=root', '--datadir=' + self.data_dir,
                         '--skip-test-db',
                         '--auth-root-authentication-method=socket'],
                        log=log)
        self.daemons.start(self.NAME, [
            'mariadbd', '--no-defaults', '--user=root',
            '--datadir=' + self.data_dir, '--socket=' + self.socket,
            '--port=%d' % self.port, '--bind-address=127.0.0.1',
            '--pid-file=' + self.data_dir + '.pid', '--skip-name-resolve',
            '--character-set-server=utf8mb4', '--max-connections=1000',
            '--innodb-buffer-pool-size=64M',
            '--innodb-flush-log-at-trx-commit=0', '--skip-log-bin'],
            marker='mariadbd')
        self.daemons.wait_port(self.NAME, self.port, timeout=120)
        if fresh:
            self.sql("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'; "
                     "GRANT ALL PRIVILEGES ON *.* TO '%s'@'127.0.0.1'" % (
                         USER, PASSWORD, USER))
        return self

    def stop(self):
        self.daemons.stop(self.NAME, timeout=60)

    def sql(self, statement):
        return subprocess.run(
            ['mariadb', '--no-defaults', '-S', self.socket, '-u', 'root',
             '-e', statement], check=True, capture_output=True,
            text=True).stdout

    def create_database(self, name):
        """Create database ``name`` unless it exists; returns its URL."""
        self.sql('CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4'
                 % name)
        return self.url(name)
