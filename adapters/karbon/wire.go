package karbon

import (
	"fmt"
	"time"
)

// Karbon's published wire shapes, only the fields we read. Nullable
// strings decode as empty.

type odataList[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"@odata.nextLink"`
}

type contactSummary struct {
	ContactKey           string
	FullName             string
	ContactType          string
	LastModifiedDateTime string
}

type organizationSummary struct {
	OrganizationKey      string
	FullName             string
	ContactType          string
	LastModifiedDateTime string
}

type clientGroupSummary struct {
	ClientGroupKey       string
	FullName             string
	LastModifiedDateTime string
}

type businessCard struct {
	BusinessCardKey string
	EntityType      string
	EntityKey       string
	IsPrimaryCard   bool
	EmailAddresses  []string
	PhoneNumbers    []struct{ Number, CountryCode, Label string }
	Addresses       []struct {
		AddressLines, City, StateProvinceCounty, ZipCode, CountryCode, Label string
	}
	RoleOrTitle     string
	OrganizationKey string
}

type teamMember struct {
	MemberKey  string
	MemberType string
	RoleType   string
}

type accountingDetail struct {
	EntityType     string
	TaxCountryCode string
}

type contactDetail struct {
	ContactKey           string
	FirstName            string
	MiddleName           string
	LastName             string
	PreferredName        string
	ContactType          string
	ClientOwner          string
	RestrictionLevel     string
	LastModifiedDateTime string
	BusinessCards        []businessCard
	ClientTeam           []teamMember
	AccountingDetail     *accountingDetail
}

type orgContact struct {
	ContactKey   string
	FullName     string
	EmailAddress string
	PhoneNumber  string
	RoleOrTitle  string
}

type organizationDetail struct {
	OrganizationKey      string
	FullName             string
	ContactType          string
	ClientOwner          string
	RestrictionLevel     string
	LastModifiedDateTime string
	BusinessCards        []businessCard
	Contacts             []orgContact
	ClientTeam           []teamMember
	AccountingDetail     *accountingDetail
}

type clientGroupDetail struct {
	ClientGroupKey       string
	FullName             string
	ContactType          string
	ClientOwner          string
	PrimaryContact       string
	RestrictionLevel     string
	LastModifiedDateTime string
	BusinessCard         *businessCard
	ClientTeam           []teamMember
}

type workItem struct {
	WorkItemKey           string
	AssigneeEmailAddress  string
	AssigneeKey           string
	Title                 string
	ClientKey             string
	ClientType            string
	RelatedClientGroupKey string
	StartDate             string
	DueDate               string
	DeadlineDate          string
	CompletedDate         string
	WorkType              string
	WorkStatus            string
	PrimaryStatus         string
	SecondaryStatus       string
	Description           string
	// read is when the read of it began (zero: not known), which orders
	// its stamp (practice/stamps).
	read time.Time
}

type userSummary struct {
	Id           string
	Name         string
	EmailAddress string
}

type userDetail struct {
	Id           string
	Name         string
	EmailAddress string
	Roles        []struct{ Name, Key string }
}

type workStatus struct {
	Name     string
	Children []struct{ Name string }
}

type tenantSettings struct {
	WorkStatuses []workStatus
}

// karbonTime reads Karbon's date-times ("2022-07-05T07:30:13.7188114Z").
// Empty is the zero time.
func karbonTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	return t.UTC(), nil
}

// karbonDate is the date part of a Karbon date-time, "" for none.
func karbonDate(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	t, err := karbonTime(s)
	if err != nil {
		return "", err
	}
	return t.Format(time.DateOnly), nil
}

// odataString quotes a value for $filter, doubling single quotes.
func odataString(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
