package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// SecurityConfig is how the brokers want to be reached: TLS, SASL or
// both, as a managed Kafka service asks. The zero value is plain TCP with
// no authentication, for a broker on a private network.
type SecurityConfig struct {
	// TLS turns on TLS (PRACTICEGW_KAFKA_TLS=true). Setting CAFile,
	// CertFile or ServerName implies it.
	TLS bool `json:"tls,omitempty"`
	// CAFile is a PEM bundle of the authorities that sign the brokers'
	// certificates (PRACTICEGW_KAFKA_TLS_CA). Default: the system's.
	CAFile string `json:"tls_ca,omitempty"`
	// CertFile and KeyFile are a client certificate, for brokers that
	// authenticate clients by TLS (PRACTICEGW_KAFKA_TLS_CERT,
	// PRACTICEGW_KAFKA_TLS_KEY).
	CertFile string `json:"tls_cert,omitempty"`
	KeyFile  string `json:"tls_key,omitempty"`
	// ServerName overrides the name the brokers' certificates are checked
	// against (PRACTICEGW_KAFKA_TLS_SERVER_NAME).
	ServerName string `json:"tls_server_name,omitempty"`
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	// (PRACTICEGW_KAFKA_SASL_MECHANISM); empty for none. PLAIN sends the
	// password as it is: use it only over TLS.
	SASLMechanism string `json:"sasl_mechanism,omitempty"`
	// Username and Password are the SASL credentials
	// (PRACTICEGW_KAFKA_SASL_USERNAME, PRACTICEGW_KAFKA_SASL_PASSWORD).
	Username string `json:"sasl_username,omitempty"`
	Password string `json:"sasl_password,omitempty"`
}

// Security is a SecurityConfig made ready to dial with: the TLS
// configuration (nil for plain TCP) and the SASL mechanism (nil for
// none).
type Security struct {
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// Build reads the files a SecurityConfig names and checks that its
// settings fit together.
func (c SecurityConfig) Build() (Security, error) {
	var s Security
	if c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" {
		s.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return s, fmt.Errorf("kafka tls_ca: %w", err)
			}
			s.TLS.RootCAs = x509.NewCertPool()
			if !s.TLS.RootCAs.AppendCertsFromPEM(pem) {
				return s, fmt.Errorf("kafka tls_ca: %s holds no PEM certificate", c.CAFile)
			}
		}
		if (c.CertFile == "") != (c.KeyFile == "") {
			return s, errors.New("kafka tls_cert and tls_key go together: set both or neither")
		}
		if c.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return s, fmt.Errorf("kafka client certificate: %w", err)
			}
			s.TLS.Certificates = []tls.Certificate{cert}
		}
	}
	if c.SASLMechanism == "" {
		if c.Username != "" || c.Password != "" {
			return s, errors.New("kafka sasl credentials are set but no sasl_mechanism: name PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		return s, nil
	}
	if c.Username == "" || c.Password == "" {
		return s, fmt.Errorf("kafka sasl %s needs a username and a password", c.SASLMechanism)
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		s.SASL = plain.Mechanism{Username: c.Username, Password: c.Password}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		algo := scram.SHA256
		if strings.HasSuffix(strings.ToUpper(c.SASLMechanism), "512") {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, c.Username, c.Password)
		if err != nil {
			return s, fmt.Errorf("kafka sasl %s: %w", c.SASLMechanism, err)
		}
		s.SASL = m
	default:
		return s, fmt.Errorf("kafka sasl_mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism)
	}
	return s, nil
}

// dialer connects the consumer group, partition readers and topic
// administration the way the brokers want.
func (s Security) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{
		ClientID:      "practicegw",
		Timeout:       10 * time.Second,
		DualStack:     true,
		TLS:           s.TLS,
		SASLMechanism: s.SASL,
	}
}

// transport connects writers the way the brokers want. It is a transport
// of its own: kafka-go's default one is shared by the whole process and
// caches metadata, so a topic created after it first looked
// (EnsureTopics, an operator) stays unknown to it for a while.
func (s Security) transport() *kafkago.Transport {
	return &kafkago.Transport{
		ClientID:    "practicegw",
		DialTimeout: 5 * time.Second,
		MetadataTTL: 2 * time.Second,
		TLS:         s.TLS,
		SASL:        s.SASL,
	}
}
