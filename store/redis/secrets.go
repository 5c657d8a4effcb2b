package redis

import (
	"context"
	"encoding/json"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
)

// Secrets (the generated signing key, endpoint secrets, upstream state
// such as vendors' refresh tokens) are stored sealed under the store's key
// (internal/sealed). pgw:secrets_check holds a value sealed the first
// time, by which a process configured with another key fails at start
// rather than at the first secret it reads; <prefix>sealed and
// <prefix>sealed_upstream are set once PrepareSecrets has sealed what an
// earlier version left in plain text.
const (
	keySecretsCheck = "pgw:secrets_check"
	whatCheck       = "secrets-key-check"
)

func whatSigningKey(id string) string      { return "signing-key:" + id }
func whatEndpointSecrets(id string) string { return "endpoint-secrets:" + id }

// replaceScript sets KEYS[1] to ARGV[2] only if it still holds ARGV[1].
var replaceScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0`)

// PrepareSecrets checks that the secrets in Redis are sealed under this
// store's key (sealing the check value the first time) and seals those a
// version before sealing left in plain text. Every gateway and dispatcher
// runs it at start; running it side by side is safe.
func (s *Store) PrepareSecrets(ctx context.Context) error {
	if err := s.checkSecretsKey(ctx); err != nil {
		return err
	}
	// Each pass has its own mark, so that a store the endpoints' pass
	// already went over still gets the upstream state's.
	if err := s.sealOnce(ctx, "sealed", s.sealEndpoints); err != nil {
		return err
	}
	return s.sealOnce(ctx, "sealed_upstream", s.sealUpstreamState)
}

// sealOnce runs seal unless its mark says it ran to the end before, and
// sets the mark when it has.
func (s *Store) sealOnce(ctx context.Context, mark string, seal func(context.Context) error) error {
	done := s.key(mark)
	cctx, cancel := s.ctx(ctx)
	n, err := s.rdb.Exists(cctx, done).Result()
	cancel()
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if n == 1 {
		return nil
	}
	if err := seal(ctx); err != nil {
		return err
	}
	cctx, cancel = s.ctx(ctx)
	defer cancel()
	return s.rdb.Set(cctx, done, "1", 0).Err()
}

// sealEndpoints seals the generated signing key and every endpoint's
// secrets that an earlier version stored in plain text.
func (s *Store) sealEndpoints(ctx context.Context) error {
	if err := s.sealSigningKey(ctx); err != nil {
		return err
	}
	for cursor := uint64(0); ; {
		cctx, cancel := s.ctx(ctx)
		keys, next, err := s.rdb.Scan(cctx, cursor, s.key("ep:*"), 500).Result()
		cancel()
		if err != nil {
			return fmt.Errorf("listing endpoints to seal: %w", err)
		}
		for _, k := range keys {
			if err := s.sealEndpointRecord(ctx, k); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func (s *Store) checkSecretsKey(ctx context.Context) error {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	if err := s.rdb.SetNX(ctx, keySecretsCheck, s.secrets.Seal([]byte("practicegw"), whatCheck), 0).Err(); err != nil {
		return fmt.Errorf("storing the secrets key check in redis: %w", err)
	}
	check, err := s.rdb.Get(ctx, keySecretsCheck).Bytes()
	if err != nil {
		return fmt.Errorf("reading the secrets key check from redis: %w", err)
	}
	if _, err := s.secrets.Open(check, whatCheck); err != nil {
		return fmt.Errorf("the secrets in redis: %w; every instance needs the key they were sealed with", err)
	}
	return nil
}

// sealEndpointRecord seals the endpoint record at key if it holds its
// secrets in plain text.
func (s *Store) sealEndpointRecord(ctx context.Context, key string) error {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	raw, err := s.rdb.Get(cctx, key).Bytes()
	if isNil(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s to seal it: %w", key, err)
	}
	var rec endpointRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	if rec.Sealed != "" || rec.Secrets == nil {
		return nil
	}
	ep, _ := s.openEndpoint(rec, rec.Endpoint.ID) // plain text: nothing to open
	sealedRec, err := s.encodeEndpoint(ep)
	if err != nil {
		return err
	}
	// Changed meanwhile, it was written sealed.
	if err := replaceScript.Run(cctx, s.rdb, []string{key}, raw, sealedRec).Err(); err != nil {
		return fmt.Errorf("sealing %s: %w", key, err)
	}
	return nil
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

func (s *Store) encodeEndpoint(ep dispatcher.Endpoint) ([]byte, error) {
	secrets, err := json.Marshal(ep.Secrets)
	if err != nil {
		return nil, err
	}
	return encode(endpointRecord{Endpoint: ep, Firm: ep.Firm, Sealed: string(s.secrets.Seal(secrets, whatEndpointSecrets(ep.ID)))})
}

// decodeEndpoint reads the record stored for endpoint id, its secrets
// opened. The secrets are bound to id, so a record copied under another id
// does not open.
func (s *Store) decodeEndpoint(id string, raw []byte) (dispatcher.Endpoint, error) {
	var rec endpointRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("decode endpoint %s: %w", id, err)
	}
	return s.openEndpoint(rec, id)
}

func (s *Store) openEndpoint(rec endpointRecord, id string) (dispatcher.Endpoint, error) {
	ep := rec.Endpoint
	ep.Firm, ep.Secrets = rec.Firm, rec.Secrets
	if rec.Sealed == "" {
		return ep, nil
	}
	plain, err := s.secrets.Open([]byte(rec.Sealed), whatEndpointSecrets(id))
	if err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("endpoint %s: opening its secrets: %w", id, err)
	}
	if err := json.Unmarshal(plain, &ep.Secrets); err != nil {
		return dispatcher.Endpoint{}, fmt.Errorf("endpoint %s: decoding its secrets: %w", id, err)
	}
	return ep, nil
}
