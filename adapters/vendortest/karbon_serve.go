package vendortest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// The Karbon double's HTTP side: routing, lists, reads and writes in
// Karbon's published shapes.

func (k *Karbon) serve(w http.ResponseWriter, r *http.Request) {
	if f, ok := k.pathFault(r.URL.Path); ok {
		if f.Delay > 0 && !sleep(r.Context(), f.Delay) {
			return
		}
		// A fault with no status only stalls, then serves.
		if f.Status != 0 {
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			writeJSON(w, f.Status, []byte(f.Body))
			return
		}
	}
	k.mu.Lock()
	known := k.knownKey(r.Header.Get("AccessKey"))
	k.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+k.Bearer || !known {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"statusCode": "401", "message": "JWT not present."}})
		writeJSON(w, http.StatusUnauthorized, b)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, r.Method+" "+r.URL.RequestURI())
	if r.Method != http.MethodGet {
		k.changed()
	}
	path := strings.TrimPrefix(r.URL.Path, "/v3/")
	coll, key, _ := strings.Cut(path, "/")
	if coll == "WebhookSubscriptions" {
		k.subscriptions(w, r, key)
		return
	}
	switch {
	case r.Method == http.MethodGet && coll == "Invoices" && key == "":
		k.listInvoices(w, r)
	case r.Method == http.MethodGet && coll == "Invoices":
		k.getInvoice(w, key, expansions(r))
	case r.Method == http.MethodGet && coll == "Payments" && key == "":
		k.listPayments(w, r)
	case r.Method == http.MethodGet && coll == "Payments":
		k.getPayment(w, key)
	case r.Method == http.MethodGet && key == "":
		k.list(w, r, coll)
	case r.Method == http.MethodGet:
		k.get(w, coll, key, expansions(r))
	case r.Method == http.MethodPost && key == "":
		k.create(w, r, coll)
	case r.Method == http.MethodPut || r.Method == http.MethodPatch:
		k.update(w, r, coll, key)
	default:
		karbonError(w, http.StatusNotFound, "4004", "No HTTP resource was found that matches the request URI.")
	}
}

func (k *Karbon) list(w http.ResponseWriter, r *http.Request, coll string) {
	var fields map[string]func(map[string]any) string
	str := func(name string) func(map[string]any) string {
		return func(m map[string]any) string { s, _ := m[name].(string); return s }
	}
	rows, kept := k.rows[coll]
	switch coll {
	case "Contacts":
		if !kept {
			for _, key := range sortedKeys(k.contacts) {
				rows = append(rows, k.contactSummary(k.contacts[key]))
			}
		}
		fields = map[string]func(map[string]any) string{"FullName": str("FullName"), "EmailAddress": str("EmailAddress"),
			"PhoneNumber": str("PhoneNumber"), "ContactType": str("ContactType"), "ExternalKey": str("ExternalKey")}
	case "Organizations":
		if !kept {
			for _, key := range sortedKeys(k.orgs) {
				rows = append(rows, k.orgSummary(k.orgs[key]))
			}
		}
		fields = map[string]func(map[string]any) string{"FullName": str("FullName"), "EmailAddress": str("EmailAddress"),
			"ContactType": str("ContactType"), "ExternalKey": str("ExternalKey")}
	case "ClientGroups":
		if !kept {
			for _, key := range sortedKeys(k.groups) {
				g := k.groups[key]
				rows = append(rows, map[string]any{"@odata.type": "#KarbonService.ClientGroupSummaryDTO",
					"ClientGroupKey": g.ClientGroupKey, "FullName": g.FullName, "PhoneNumber": nil, "Website": nil,
					"LastModifiedDateTime": g.LastModified.Format(time.RFC3339)})
			}
		}
		fields = map[string]func(map[string]any) string{"FullName": str("FullName")}
	case "WorkItems":
		if !kept {
			for _, key := range sortedKeys(k.work) {
				rows = append(rows, k.workJSON(k.work[key], "#KarbonService.WorkItemSummaryDTO"))
			}
		}
		fields = map[string]func(map[string]any) string{"AssigneeEmailAddress": str("AssigneeEmailAddress"),
			"ClientKey": str("ClientKey"), "PrimaryStatus": str("PrimaryStatus"), "StartDate": str("StartDate"),
			"Title": str("Title"), "WorkScheduleKey": str("WorkScheduleKey"), "WorkStatus": str("WorkStatus"),
			"WorkTemplateKey": str("WorkTemplateKey"), "WorkType": str("WorkType")}
	case "Users":
		if !kept {
			for _, key := range sortedKeys(k.users) {
				u := k.users[key]
				rows = append(rows, map[string]any{"Id": u.Id, "Name": u.Name, "EmailAddress": u.EmailAddress})
			}
		}
		fields = map[string]func(map[string]any) string{"Name": str("Name"), "EmailAddress": str("EmailAddress")}
	case "TenantSettings":
		k.tenantSettings(w)
		return
	default:
		karbonError(w, http.StatusNotFound, "4004", "No HTTP resource was found that matches the request URI.")
		return
	}
	k.keepList(coll, rows)
	rows, ok := orderRows(w, r, coll, rows)
	if !ok {
		return
	}
	k.odataPage(w, r, coll, rows, fields)
}

// karbonOrderable are the properties each list publishes for $orderby.
var karbonOrderable = map[string][]string{
	"Contacts":      {"FullName", "LastModifiedDateTime"},
	"Organizations": {"FullName", "LastModifiedDateTime"},
	"ClientGroups":  {"FullName"},
	"WorkItems":     {"StartDate", "DeadlineDate"},
}

// orderRows sorts a list's rows by $orderby, "Prop" or "Prop desc" with
// Prop one the collection publishes; rows that tie keep Karbon's default
// order, by key. The kept rows are not reordered in place. Any other
// $orderby is answered as OData answers an unknown property.
func orderRows(w http.ResponseWriter, r *http.Request, coll string, rows []map[string]any) ([]map[string]any, bool) {
	v := strings.TrimSpace(r.URL.Query().Get("$orderby"))
	if v == "" {
		return rows, true
	}
	prop, dir, _ := strings.Cut(v, " ")
	desc := false
	switch strings.TrimSpace(dir) {
	case "", "asc":
	case "desc":
		desc = true
	default:
		karbonError(w, http.StatusBadRequest, "4002", fmt.Sprintf("The query specified in the URI is not valid: $orderby %q.", v))
		return nil, false
	}
	if !slices.Contains(karbonOrderable[coll], prop) {
		karbonError(w, http.StatusBadRequest, "4002",
			fmt.Sprintf("The query specified in the URI is not valid. Could not find a property named '%s' on type 'KarbonService.SummaryDTO'.", prop))
		return nil, false
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b map[string]any) int {
		c := compareKarbonValues(a[prop], b[prop])
		if desc {
			c = -c
		}
		return c
	})
	return sorted, true
}

// compareKarbonValues orders two values of a row: null first, date-times
// as instants, other strings as text.
func compareKarbonValues(a, b any) int {
	as, aok := a.(string)
	bs, bok := b.(string)
	if !aok || !bok {
		return cmp.Compare(boolInt(aok), boolInt(bok))
	}
	at, aerr := time.Parse(time.RFC3339Nano, as)
	bt, berr := time.Parse(time.RFC3339Nano, bs)
	if aerr == nil && berr == nil {
		return at.Compare(bt)
	}
	return strings.Compare(as, bs)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expansions are the related parts a read asks for in $expand, a
// comma-separated list.
func expansions(r *http.Request) map[string]bool {
	out := map[string]bool{}
	for _, e := range strings.Split(r.URL.Query().Get("$expand"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			out[e] = true
		}
	}
	return out
}

// get answers a record. Its related parts (business cards, client team,
// an organization's contacts) come only when expand names them.
func (k *Karbon) get(w http.ResponseWriter, coll, key string, expand map[string]bool) {
	var body map[string]any
	switch coll {
	case "Contacts":
		if c := k.contacts[key]; c != nil {
			body = k.contactDetail(c, expand)
		}
	case "Organizations":
		if o := k.orgs[key]; o != nil {
			body = k.orgDetail(o, expand)
		}
	case "ClientGroups":
		if g := k.groups[key]; g != nil {
			body = map[string]any{"@odata.type": "#KarbonService.ClientGroupDTO", "ClientGroupKey": g.ClientGroupKey,
				"FullName": g.FullName, "ContactType": g.ContactType, "PrimaryContact": g.PrimaryContact,
				"ClientOwner": k.userEmail(g.OwnerKey), "LastModifiedDateTime": g.LastModified.Format(time.RFC3339),
				"Members": []any{}}
			if expand["ClientTeam"] {
				body["ClientTeam"] = k.team(g.OwnerKey)
			}
			if expand["BusinessCard"] {
				body["BusinessCard"] = nil
			}
		}
	case "WorkItems":
		if wi := k.work[key]; wi != nil {
			body = k.workJSON(wi, "#KarbonService.WorkItemDTO")
		}
	case "Users":
		if u := k.users[key]; u != nil {
			roles := []map[string]string{}
			for i, r := range u.Roles {
				roles = append(roles, map[string]string{"Name": r, "Key": fmt.Sprintf("role%d", i)})
			}
			body = map[string]any{"Id": u.Id, "Name": u.Name, "EmailAddress": u.EmailAddress, "Roles": roles,
				"Permissions": []string{"User"}, "Teams": []any{}}
		}
	}
	if body == nil {
		karbonError(w, http.StatusNotFound, "4004", "No "+strings.TrimSuffix(coll, "s")+" found for provided key")
		return
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

func (k *Karbon) userEmail(key string) any {
	if u := k.users[key]; u != nil {
		return u.EmailAddress
	}
	return nil
}

func (k *Karbon) team(owner string) []map[string]any {
	if owner == "" {
		return []map[string]any{}
	}
	return []map[string]any{{"MemberKey": owner, "MemberType": "User", "RoleType": "ClientOwner"}}
}

func (k *Karbon) contactSummary(c *KarbonContact) map[string]any {
	return map[string]any{"@odata.type": "#KarbonService.ContactSummaryDTO", "ContactKey": c.ContactKey,
		"FullName": c.FirstName + " " + c.LastName, "ClientOwner": k.userEmail(c.OwnerKey), "EmailAddress": c.Email,
		"PhoneNumber": c.Phone, "RoleOrTitle": c.Role, "ContactType": c.ContactType, "ExternalKey": c.ExternalKey,
		"LastModifiedDateTime": c.LastModified.Format(time.RFC3339)}
}

func (k *Karbon) orgSummary(o *KarbonOrganization) map[string]any {
	return map[string]any{"@odata.type": "#KarbonService.OrganizationSummaryDTO", "OrganizationKey": o.OrganizationKey,
		"FullName": o.FullName, "EmailAddress": o.Email, "PhoneNumber": o.Phone, "ContactType": o.ContactType,
		"ExternalKey": o.ExternalKey, "LastModifiedDateTime": o.LastModified.Format(time.RFC3339)}
}

func card(entityType, key, email, phone, country, role, org string) map[string]any {
	c := map[string]any{"BusinessCardKey": "bc-" + key, "EntityType": entityType, "EntityKey": key,
		"IsPrimaryCard": true, "EmailAddresses": []string{}, "PhoneNumbers": []any{}, "Addresses": []any{},
		"RoleOrTitle": nil, "OrganizationKey": nil}
	if email != "" {
		c["EmailAddresses"] = []string{email}
	}
	if phone != "" {
		c["PhoneNumbers"] = []any{map[string]string{"Number": phone, "CountryCode": country, "Label": "Work"}}
	}
	if country != "" {
		c["Addresses"] = []any{map[string]string{"AddressLines": "1 High Street", "CountryCode": country, "Label": "Physical"}}
	}
	if role != "" {
		c["RoleOrTitle"] = role
	}
	if org != "" {
		c["OrganizationKey"] = org
	}
	return c
}

func (k *Karbon) contactDetail(c *KarbonContact, expand map[string]bool) map[string]any {
	m := map[string]any{"@odata.type": "#KarbonService.ContactDTO", "ContactKey": c.ContactKey,
		"FirstName": c.FirstName, "LastName": c.LastName, "ContactType": c.ContactType,
		"ClientOwner": k.userEmail(c.OwnerKey), "LastModifiedDateTime": c.LastModified.Format(time.RFC3339),
		"RestrictionLevel": "Public",
		"AccountingDetail": map[string]any{"ContactPermaKey": c.ContactKey, "EntityType": "Person"}}
	if expand["BusinessCards"] {
		m["BusinessCards"] = []any{card("Contact", c.ContactKey, c.Email, c.Phone, c.Country, c.Role, c.OrganizationKey)}
	}
	if expand["ClientTeam"] {
		m["ClientTeam"] = k.team(c.OwnerKey)
	}
	return m
}

func (k *Karbon) orgDetail(o *KarbonOrganization, expand map[string]bool) map[string]any {
	contacts := []map[string]any{}
	for _, key := range sortedKeys(k.contacts) {
		c := k.contacts[key]
		if c.OrganizationKey == o.OrganizationKey {
			contacts = append(contacts, map[string]any{"ContactKey": c.ContactKey, "FullName": c.FirstName + " " + c.LastName,
				"EmailAddress": c.Email, "PhoneNumber": c.Phone, "RoleOrTitle": c.Role,
				"LastModifiedDateTime": c.LastModified.Format(time.RFC3339)})
		}
	}
	var entity any
	if o.EntityType != "" {
		entity = o.EntityType
	}
	m := map[string]any{"@odata.type": "#KarbonService.OrganizationDTO", "OrganizationKey": o.OrganizationKey,
		"FullName": o.FullName, "ContactType": o.ContactType, "ClientOwner": k.userEmail(o.OwnerKey),
		"LastModifiedDateTime": o.LastModified.Format(time.RFC3339), "RestrictionLevel": "Public",
		"AccountingDetail": map[string]any{"OrganizationPermaKey": o.OrganizationKey, "EntityType": entity}}
	if expand["BusinessCards"] {
		m["BusinessCards"] = []any{card("Organization", o.OrganizationKey, o.Email, o.Phone, o.Country, "", "")}
	}
	if expand["Contacts"] {
		m["Contacts"] = contacts
	}
	if expand["ClientTeam"] {
		m["ClientTeam"] = k.team(o.OwnerKey)
	}
	return m
}

func (k *Karbon) workJSON(wi *KarbonWorkItem, typ string) map[string]any {
	b, _ := json.Marshal(wi)
	var m map[string]any
	json.Unmarshal(b, &m)
	m["@odata.type"] = typ
	return m
}

func (k *Karbon) tenantSettings(w http.ResponseWriter) {
	var statuses []map[string]any
	for _, s := range k.statuses {
		children := []map[string]string{}
		for i, sec := range s.Secondaries {
			children = append(children, map[string]string{"Name": sec, "Type": "Secondary", "WorkStatusKey": fmt.Sprintf("%s-%d", s.Primary, i)})
		}
		statuses = append(statuses, map[string]any{"Name": s.Primary, "Type": "Primary", "Children": children})
	}
	b, _ := json.Marshal(map[string]any{"TenantKey": "tenant", "ContactTypes": []any{}, "WorkStatuses": statuses, "WorkTypes": []any{}})
	writeJSON(w, http.StatusOK, b)
}

func (k *Karbon) nextKey() string {
	k.seq++
	return fmt.Sprintf("new%05d", k.seq)
}

// userKey resolves a ClientOwner or assignee given as a user key or email.
func (k *Karbon) userKey(v string) (string, bool) {
	if v == "" {
		return "", true
	}
	if _, ok := k.users[v]; ok {
		return v, true
	}
	for _, u := range k.users {
		if strings.EqualFold(u.EmailAddress, v) {
			return u.Id, true
		}
	}
	return "", false
}

type karbonCard struct {
	EmailAddresses []string
	PhoneNumbers   []struct{ Number, CountryCode string }
	Addresses      []struct{ CountryCode string }
}

func (c karbonCard) apply(email, phone, country *string) {
	if len(c.EmailAddresses) > 0 {
		*email = c.EmailAddresses[0]
	}
	if len(c.PhoneNumbers) > 0 {
		*phone = c.PhoneNumbers[0].Number
	}
	if len(c.Addresses) > 0 {
		*country = c.Addresses[0].CountryCode
	}
}

type karbonWrite struct {
	FirstName, LastName, FullName *string
	ContactType, ClientOwner      *string
	BusinessCards                 []karbonCard
	AccountingDetail              *struct{ EntityType *string }

	Title, AssigneeEmailAddress, ClientKey, ClientType, StartDate *string
	DeadlineDate                                                  *string
	WorkType, WorkStatus, PrimaryStatus, SecondaryStatus          *string
	Description, DueDate                                          *string

	Subject, Body, AuthorEmailAddress *string
	Timelines                         []struct{ EntityType, EntityKey string }
}

func (k *Karbon) create(w http.ResponseWriter, r *http.Request, coll string) {
	raw, _ := io.ReadAll(r.Body)
	var in karbonWrite
	if err := json.Unmarshal(raw, &in); err != nil {
		karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: "+coll)
		return
	}
	var key string
	switch coll {
	case "Contacts":
		if in.FirstName == nil || in.LastName == nil || *in.FirstName == "" || *in.LastName == "" {
			karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: Contact")
			return
		}
		c := &KarbonContact{ContactKey: k.nextKey(), LastModified: k.now()}
		if !k.applyContact(w, c, in) {
			return
		}
		k.contacts[c.ContactKey] = c
		key = c.ContactKey
		k.told("Contact", key, "Inserted")
	case "Organizations":
		if in.FullName == nil || *in.FullName == "" {
			karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: Organization")
			return
		}
		o := &KarbonOrganization{OrganizationKey: k.nextKey(), LastModified: k.now()}
		if !k.applyOrg(w, o, in) {
			return
		}
		k.orgs[o.OrganizationKey] = o
		key = o.OrganizationKey
		k.told("Contact", key, "Inserted")
	case "WorkItems":
		if in.Title == nil || in.AssigneeEmailAddress == nil || in.ClientKey == nil || in.ClientType == nil || in.StartDate == nil {
			karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: WorkItem")
			return
		}
		wi := &KarbonWorkItem{WorkItemKey: k.nextKey(), PrimaryStatus: "Planned"}
		if !k.applyWork(w, wi, in, true) {
			return
		}
		k.work[wi.WorkItemKey] = wi
		key = wi.WorkItemKey
		k.told("Work", key, "Inserted")
	case "Notes":
		if in.Subject == nil || in.Body == nil || in.AuthorEmailAddress == nil {
			karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: Note")
			return
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		k.notes = append(k.notes, m)
		writeJSON(w, http.StatusCreated, raw)
		return
	default:
		karbonError(w, http.StatusNotFound, "4004", "No HTTP resource was found that matches the request URI.")
		return
	}
	w.Header().Set("Location", fmt.Sprintf("%s/v3/%s('%s')", k.URL, coll, key))
	k.get(statusWriter{w, http.StatusCreated}, coll, key, map[string]bool{"BusinessCards": true, "ClientTeam": true, "Contacts": true})
}

// statusWriter answers a GET's body with another status (201 Created).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s statusWriter) WriteHeader(int) { s.ResponseWriter.WriteHeader(s.status) }

func (k *Karbon) update(w http.ResponseWriter, r *http.Request, coll, key string) {
	raw, _ := io.ReadAll(r.Body)
	var in karbonWrite
	if err := json.Unmarshal(raw, &in); err != nil {
		karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: "+coll)
		return
	}
	patch := r.Method == http.MethodPatch
	switch coll {
	case "Contacts":
		c := k.contacts[key]
		if c == nil {
			karbonError(w, http.StatusNotFound, "4004", "No Contact found for provided key")
			return
		}
		if !k.applyContact(w, c, in) {
			return
		}
		c.LastModified = k.now()
	case "Organizations":
		o := k.orgs[key]
		if o == nil {
			karbonError(w, http.StatusNotFound, "4004", "No Organization found for provided key")
			return
		}
		if !k.applyOrg(w, o, in) {
			return
		}
		o.LastModified = k.now()
	case "ClientGroups":
		g := k.groups[key]
		if g == nil {
			karbonError(w, http.StatusNotFound, "4004", "No Client Group found for provided key")
			return
		}
		if in.FullName != nil {
			g.FullName = *in.FullName
		}
		if in.ContactType != nil {
			g.ContactType = *in.ContactType
		}
		if in.ClientOwner != nil {
			owner, ok := k.userKey(*in.ClientOwner)
			if !ok {
				karbonError(w, http.StatusBadRequest, "4003", "Invalid Model.")
				return
			}
			g.OwnerKey = owner
		}
		g.LastModified = k.now()
	case "WorkItems":
		wi := k.work[key]
		if wi == nil {
			karbonError(w, http.StatusNotFound, "4004", "No Work Item found for provided key")
			return
		}
		if patch && (in.WorkStatus != nil || in.PrimaryStatus != nil || in.SecondaryStatus != nil || in.ClientKey != nil) {
			karbonError(w, http.StatusBadRequest, "4002", "Invalid property to update. Only Title, Description, StartDate, DueDate, DeadlineDate, AssigneeEmailAddress and WorkType can be patched.")
			return
		}
		if !patch && (in.Title == nil || in.AssigneeEmailAddress == nil || in.ClientKey == nil || in.ClientType == nil || in.StartDate == nil) {
			karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: WorkItem")
			return
		}
		next := *wi
		if !k.applyWork(w, &next, in, !patch) {
			return
		}
		*wi = next
	default:
		karbonError(w, http.StatusNotFound, "4004", "No HTTP resource was found that matches the request URI.")
		return
	}
	typ := "Contact"
	if coll == "WorkItems" {
		typ = "Work"
	}
	k.told(typ, key, "Updated")
	w.WriteHeader(http.StatusNoContent)
}

func (k *Karbon) applyContact(w http.ResponseWriter, c *KarbonContact, in karbonWrite) bool {
	set(&c.FirstName, in.FirstName)
	set(&c.LastName, in.LastName)
	set(&c.ContactType, in.ContactType)
	if in.ClientOwner != nil {
		owner, ok := k.userKey(*in.ClientOwner)
		if !ok {
			karbonError(w, http.StatusBadRequest, "4003", "Invalid Model.")
			return false
		}
		c.OwnerKey = owner
	}
	if len(in.BusinessCards) > 0 {
		in.BusinessCards[0].apply(&c.Email, &c.Phone, &c.Country)
	}
	return true
}

func (k *Karbon) applyOrg(w http.ResponseWriter, o *KarbonOrganization, in karbonWrite) bool {
	set(&o.FullName, in.FullName)
	set(&o.ContactType, in.ContactType)
	if in.ClientOwner != nil {
		owner, ok := k.userKey(*in.ClientOwner)
		if !ok {
			karbonError(w, http.StatusBadRequest, "4003", "Invalid Model.")
			return false
		}
		o.OwnerKey = owner
	}
	if in.AccountingDetail != nil {
		set(&o.EntityType, in.AccountingDetail.EntityType)
	}
	if len(in.BusinessCards) > 0 {
		in.BusinessCards[0].apply(&o.Email, &o.Phone, &o.Country)
	}
	return true
}

func (k *Karbon) applyWork(w http.ResponseWriter, wi *KarbonWorkItem, in karbonWrite, full bool) bool {
	set(&wi.Title, in.Title)
	set(&wi.WorkType, in.WorkType)
	set(&wi.StartDate, in.StartDate)
	set(&wi.Description, in.Description)
	if in.DeadlineDate != nil || full {
		wi.DeadlineDate = in.DeadlineDate
	}
	if in.AssigneeEmailAddress != nil {
		u, ok := k.userKey(*in.AssigneeEmailAddress)
		if !ok || u == "" {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"code":"4003","message":"Invalid Model.","details":{"code":"InvalidProperty","target":"workItem.AssigneeEmailAddress","message":"AssigneeEmailAddress is not a valid user"}}}`))
			return false
		}
		wi.AssigneeKey = u
	}
	if in.ClientKey != nil {
		if k.clientName(*in.ClientKey) == "" {
			writeJSON(w, http.StatusBadRequest, []byte(`{"error":{"code":"4003","message":"Invalid Model.","details":{"code":"InvalidProperty","target":"workItem.ClientKey","message":"ClientKey is not a valid Contact Key"}}}`))
			return false
		}
		wi.ClientKey = *in.ClientKey
		wi.ClientName = ""
		set(&wi.ClientType, in.ClientType)
	}
	if in.PrimaryStatus != nil {
		sec := ""
		if in.SecondaryStatus != nil {
			sec = *in.SecondaryStatus
		}
		if !k.validStatus(*in.PrimaryStatus, sec) {
			karbonError(w, http.StatusBadRequest, "4003", "Invalid Model.")
			return false
		}
		wi.PrimaryStatus, wi.SecondaryStatus = *in.PrimaryStatus, sec
		wi.CompletedDate = ""
		if wi.PrimaryStatus == "Completed" {
			wi.CompletedDate = k.now().Format(time.RFC3339)
		}
	}
	k.fillWork(wi)
	return true
}

func (k *Karbon) validStatus(primary, secondary string) bool {
	for _, s := range k.statuses {
		if s.Primary != primary {
			continue
		}
		if secondary == "" {
			return true
		}
		for _, sec := range s.Secondaries {
			if sec == secondary {
				return true
			}
		}
	}
	return false
}

func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
