// Package filing reads what a document is from where and how a firm filed
// it: its kind from folder and file names, its client from the client
// folder it sits under. The document-store adapters (graph, gdrive,
// dropbox) share it, so every store classifies alike and a firm changes
// the conventions in one place.
//
// The default layout is the one the demo records use and many practices
// keep: <root>/<client>/<year>/<kind folder>/<file>, with kind folders
// such as "Engagement letters", "Identity", "Source documents", "Working
// papers", "Accounts", "Tax return" and "Correspondence". Kinds come from
// the path below the client folder and the file name, so a client called
// "Tax Solutions Ltd" does not make every one of its documents a tax
// return.
package filing

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
)

// Rule gives documents whose folder path (below the client folder) and
// name contain every phrase of Match the kind Kind. Phrases match whole
// words, ignoring case, underscores and hyphens.
type Rule struct {
	Match []string `json:"match"`
	Kind  string   `json:"kind"`
}

// Config is a firm's filing conventions.
type Config struct {
	// KindRules are tried in order before the defaults; the first that
	// matches gives the kind, and a document no rule matches is "other".
	KindRules []Rule `json:"kind_rules,omitempty"`
	// ClientDepth is the folder level below the store's root whose name
	// names the client [1: the first level].
	ClientDepth int `json:"client_depth,omitempty"`
	// ClientPattern finds a client id written into a folder name, such as
	// "Acme Ltd [cli_o-2Nw8tnxwQCVf]"; it wins over looking the name up
	// [cli_[A-Za-z0-9_-]+].
	ClientPattern string `json:"client_pattern,omitempty"`
}

// defaultRules are the kinds of the usual folder and file names, most
// specific first.
var defaultRules = []Rule{
	{[]string{"signed", "engagement"}, "signed_engagement_letter"},
	{[]string{"engagement letter"}, "engagement_letter"},
	{[]string{"letter of engagement"}, "engagement_letter"},
	{[]string{"engagement"}, "engagement_letter"},
	{[]string{"proposal"}, "proposal"},
	{[]string{"identity"}, "identity_verification"},
	{[]string{"id verification"}, "identity_verification"},
	{[]string{"passport"}, "identity_verification"},
	{[]string{"driving licence"}, "identity_verification"},
	{[]string{"proof of address"}, "identity_verification"},
	{[]string{"kyc"}, "identity_verification"},
	{[]string{"aml"}, "identity_verification"},
	{[]string{"source documents"}, "source_document"},
	{[]string{"source document"}, "source_document"},
	{[]string{"bank statement"}, "source_document"},
	{[]string{"bank statements"}, "source_document"},
	{[]string{"receipts"}, "source_document"},
	{[]string{"records"}, "source_document"},
	{[]string{"working papers"}, "working_paper"},
	{[]string{"working paper"}, "working_paper"},
	{[]string{"workpapers"}, "working_paper"},
	{[]string{"tax return"}, "tax_return"},
	{[]string{"tax returns"}, "tax_return"},
	{[]string{"vat return"}, "tax_return"},
	{[]string{"sa100"}, "tax_return"},
	{[]string{"ct600"}, "tax_return"},
	{[]string{"form 1040"}, "tax_return"},
	{[]string{"form 1120"}, "tax_return"},
	{[]string{"form 1065"}, "tax_return"},
	{[]string{"financial statements"}, "financial_statements"},
	{[]string{"accounts"}, "financial_statements"},
	{[]string{"correspondence"}, "correspondence"},
	{[]string{"letters"}, "correspondence"},
	{[]string{"emails"}, "correspondence"},
	{[]string{"eml"}, "correspondence"},
	{[]string{"msg"}, "correspondence"},
}

// Classifier applies a Config.
type Classifier struct {
	rules   []Rule
	depth   int
	pattern *regexp.Regexp
	clients linking.Linker
}

// New checks cfg. clients finds the client a folder is named after (the
// firm's records system, by linking's rule); without it, only client ids
// written into folder names link documents to clients. The document
// store's stamps move a document's version when its link changes.
func New(cfg Config, clients linking.Linker) (*Classifier, error) {
	c := &Classifier{depth: cfg.ClientDepth, clients: clients}
	if c.depth <= 0 {
		c.depth = 1
	}
	for i, r := range cfg.KindRules {
		if !contains(practice.DocumentKinds, r.Kind) {
			return nil, fmt.Errorf("filing: kind_rules[%d]: %q is not one of %v", i, r.Kind, practice.DocumentKinds)
		}
		if len(r.Match) == 0 {
			return nil, fmt.Errorf("filing: kind_rules[%d]: match needs at least one phrase", i)
		}
		c.rules = append(c.rules, normRule(r))
	}
	for _, r := range defaultRules {
		c.rules = append(c.rules, normRule(r))
	}
	pat := cfg.ClientPattern
	if pat == "" {
		pat = `cli_[A-Za-z0-9_-]+`
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("filing: client_pattern: %w", err)
	}
	c.pattern = re
	return c, nil
}

func normRule(r Rule) Rule {
	out := Rule{Kind: r.Kind}
	for _, m := range r.Match {
		out.Match = append(out.Match, normText(m))
	}
	return out
}

// normText lowers case and turns separators into spaces, so phrases match
// "Working_Papers", "working-papers" and "Working papers" alike.
func normText(s string) string {
	s = strings.ToLower(s)
	s = strings.NewReplacer("_", " ", "-", " ", ".", " ", "/", " / ", "(", " ", ")", " ").Replace(s)
	return " " + strings.Join(strings.Fields(s), " ") + " "
}

// segments splits a relative folder path into its folder names.
func segments(rel string) []string {
	var out []string
	for _, s := range strings.Split(rel, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Kind classifies a document by its folder path relative to the store's
// root and its name.
func (c *Classifier) Kind(rel, name string) string {
	segs := segments(rel)
	if len(segs) >= c.depth {
		segs = segs[c.depth:]
	}
	text := normText(strings.Join(segs, "/") + "/" + name)
	for _, r := range c.rules {
		all := true
		for _, m := range r.Match {
			all = all && strings.Contains(text, m)
		}
		if all {
			return r.Kind
		}
	}
	return "other"
}

// Client finds a document's client from its folder path relative to the
// store's root: an id written into a folder name, else the records
// system's client of the client folder's name, else none (nil).
func (c *Classifier) Client(ctx context.Context, t practice.Tenant, rel string) (*string, error) {
	segs := segments(rel)
	for _, s := range segs {
		if id := c.pattern.FindString(s); id != "" {
			return &id, nil
		}
	}
	if c.clients == nil || len(segs) < c.depth {
		return nil, nil
	}
	folder := segs[c.depth-1]
	l, err := c.clients.LinkClient(ctx, t, linking.Candidate{Ref: "/" + strings.Join(segs[:c.depth], "/"), Name: folder})
	if err != nil {
		return nil, fmt.Errorf("client of folder %q: %w", folder, err)
	}
	return l.Ref(), nil
}

// Item is a file as a document store lists it.
type Item struct {
	ID       string
	Name     string
	MimeType string
	Size     int64
	// Root is the store's folder path of the filing root ("/Clients"),
	// Rel the file's folder below it ("/Acme Ltd/2025/Tax return").
	Root, Rel string
	DriveID   string
	WebURL    string
	Created   time.Time
	Modified  time.Time
}

// Document builds the /v1 document of an item in provider's store.
func (c *Classifier) Document(ctx context.Context, t practice.Tenant, provider string, it Item) (practice.Document, error) {
	client, err := c.Client(ctx, t, it.Rel)
	if err != nil {
		return practice.Document{}, err
	}
	folder := path.Join("/", it.Root, it.Rel)
	if folder != "/" {
		folder += "/"
	}
	mt := it.MimeType
	if mt == "" {
		mt = MimeType(it.Name)
	}
	d := practice.Document{
		ID: DocID(it.ID), Object: "document", Name: it.Name, Kind: c.Kind(it.Rel, it.Name), Client: client,
		MimeType: mt, SizeBytes: it.Size,
		Location: practice.Location{Provider: provider, Path: folder, ItemID: it.ID, DriveID: it.DriveID, WebURL: it.WebURL},
		FiledAt:  it.Created.UTC(), CreatedAt: it.Created.UTC(), UpdatedAt: it.Modified.UTC(),
		Version: practice.VersionAt(it.Modified),
	}
	return d, nil
}

// DocID is doc_ and the store's item id in unpadded base64url: store ids
// hold characters (Dropbox's "id:", Graph's "!") that ids should not.
func DocID(itemID string) string {
	return "doc_" + base64.RawURLEncoding.EncodeToString([]byte(itemID))
}

// ParseDocID returns the store's item id of a doc_ id.
func ParseDocID(id string) (string, bool) {
	enc, ok := strings.CutPrefix(id, "doc_")
	if !ok || enc == "" || len(enc) > 512 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return string(b), true
}

var officeTypes = map[string]string{
	".pdf":  "application/pdf",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".doc":  "application/msword",
	".xls":  "application/vnd.ms-excel",
	".csv":  "text/csv",
	".txt":  "text/plain",
	".eml":  "message/rfc822",
	".msg":  "application/vnd.ms-outlook",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".png":  "image/png",
	".heic": "image/heic",
	".zip":  "application/zip",
}

// MimeType guesses a file's type from its name, for stores that do not
// say (Dropbox); unknown is application/octet-stream.
func MimeType(name string) string {
	if t, ok := officeTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
