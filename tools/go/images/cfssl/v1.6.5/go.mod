// Wrapper module: cfssl and cfssljson v1.6.5 (github.com/cloudflare/cfssl) for
// docker.io/cfssl/cfssl:v1.6.5, the image kamaji-etcd's certificate job runs.
module gpu-tenancy/tools/images/cfssl

go 1.24

require github.com/cloudflare/cfssl v1.6.5

require (
	github.com/go-logr/logr v1.2.4 // indirect
	github.com/go-sql-driver/mysql v1.7.1 // indirect
	github.com/google/certificate-transparency-go v1.1.7 // indirect
	github.com/jmhodges/clock v1.2.0 // indirect
	github.com/jmoiron/sqlx v1.3.5 // indirect
	github.com/kisielk/sqlstruct v0.0.0-20201105191214-5f3e10d3ab46 // indirect
	github.com/lib/pq v1.10.9 // indirect
	github.com/mattn/go-sqlite3 v1.14.22 // indirect
	github.com/pelletier/go-toml v1.9.3 // indirect
	github.com/weppos/publicsuffix-go v0.30.0 // indirect
	github.com/zmap/zcrypto v0.0.0-20230310154051-c8b263fd8300 // indirect
	github.com/zmap/zlint/v3 v3.5.0 // indirect
	golang.org/x/crypto v0.19.0 // indirect
	golang.org/x/net v0.20.0 // indirect
	golang.org/x/text v0.14.0 // indirect
	google.golang.org/protobuf v1.32.0 // indirect
	k8s.io/klog/v2 v2.100.1 // indirect
)
