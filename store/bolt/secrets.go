package bolt

import (
	"encoding/json"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
)

// Secrets (the generated signing key, endpoint secrets, upstream state
// such as vendors' refresh tokens) are stored sealed under the store's key
// (internal/sealed). gw_secrets holds a value sealed
// the first time, by which a store opened with another key fails at once
// rather than at the first secret it reads.
const (
	bucketSecrets = "gw_secrets"
	keyCheck      = "check"
	whatCheck     = "secrets-key-check"
)

func whatSigningKey(id string) string      { return "signing-key:" + id }
func whatEndpointSecrets(id string) string { return "endpoint-secrets:" + id }

// prepareSecrets checks that the store's secrets were sealed under key,
// sealing the check value the first time, and seals what a version before
// sealing left in plain text.
func prepareSecrets(tx *bbolt.Tx, key *sealed.Key) error {
	b := tx.Bucket([]byte(bucketSecrets))
	if v := b.Get([]byte(keyCheck)); v != nil {
		if _, err := key.Open(v, whatCheck); err != nil {
			return fmt.Errorf("the store's secrets: %w; configure the key they were sealed with", err)
		}
	} else if err := b.Put([]byte(keyCheck), key.Seal([]byte("practicegw"), whatCheck)); err != nil {
		return err
	}

	if err := sealPlain(tx.Bucket([]byte(bucketKeys)), key, whatSigningKey); err != nil {
		return err
	}

	eps := tx.Bucket([]byte(bucketEndpoints))
	var plainEndpoints []dispatcher.Endpoint
	err := eps.ForEach(func(k, v []byte) error {
		var rec endpointRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decode endpoint %s: %w", k, err)
		}
		if rec.Sealed == "" && rec.Secrets != nil {
			ep, _ := rec.open(key, string(k)) // plain text: nothing to open
			plainEndpoints = append(plainEndpoints, ep)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, ep := range plainEndpoints {
		if err := putJSON(eps, ep.ID, sealEndpoint(key, ep)); err != nil {
			return err
		}
	}
	return sealUpstreamState(tx, key)
}

// endpointRecord stores what the endpoint's API form leaves out.
type endpointRecord struct {
	Endpoint dispatcher.Endpoint `json:"endpoint"`
	Firm     string              `json:"firm"`
	// Sealed is the JSON of the endpoint's secrets, sealed.
	Sealed string `json:"sealed_secrets,omitempty"`
	// Secrets is where versions before sealing kept them in plain text:
	// read, never written.
	Secrets []dispatcher.Secret `json:"secrets,omitempty"`
}

func sealEndpoint(key *sealed.Key, ep dispatcher.Endpoint) endpointRecord {
	secrets, _ := json.Marshal(ep.Secrets) // a slice of plain structs: cannot fail
	return endpointRecord{Endpoint: ep, Firm: ep.Firm, Sealed: string(key.Seal(secrets, whatEndpointSecrets(ep.ID)))}
}

// open is the endpoint stored under id, its secrets opened. The secrets
// are bound to id, so a record copied under another id does not open.
func (r endpointRecord) open(key *sealed.Key, id string) (dispatcher.Endpoint, error) {
	ep := r.Endpoint
	ep.Firm, ep.Secrets = r.Firm, r.Secrets
	if r.Sealed == "" {
		return ep, nil
	}
	plain, err := key.Open([]byte(r.Sealed), whatEndpointSecrets(id))
	if err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("opening its secrets: %w", err)
	}
	if err := json.Unmarshal(plain, &ep.Secrets); err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("decoding its secrets: %w", err)
	}
	return ep, nil
}
