package demo

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// The vocabularies below make demo records read like a real practice's:
// a UK practice files VAT returns and pays by GoCardless, a US one files
// Form 1040s and is paid by ACH. Nothing here is ever written to.

// Client categories index the per-category tables of a country; they follow
// adapters.ClientTypes.
const (
	individual = iota
	company
	partnership
	trust
	charity
	numCategories
)

func category(clientType string) int {
	switch clientType {
	case "individual":
		return individual
	case "partnership":
		return partnership
	case "trust":
		return trust
	case "charity":
		return charity
	}
	return company
}

// weighted is one choice with its relative weight.
type weighted[T any] struct {
	value  T
	weight int
}

// jobType is a kind of recurring work. Statutory work has fixed deadlines;
// the rest gets a deadline that suits its stage.
type jobType struct {
	name      string
	deadlines []string
}

// country is everything about a firm's records that depends on where it
// practises.
type country struct {
	code     string
	currency string
	tld      string
	// firmDomain formats the firm's email domain from its slug.
	firmDomain string
	mailHosts  []string
	phone      func(*rand.Rand) string
	paymentDue int    // days
	authority  string // where returns are filed

	firstNames []string
	lastNames  []string
	towns      []string

	// clientNames are templates per category; see fill.
	clientNames [numCategories][]string
	jobTypes    [numCategories][]jobType
	// scopes are proposals: a quote's title, then its tasks, "|" between.
	scopes [numCategories][]string
	rails  []weighted[string]

	sourceDocs     []string
	taxDocs        []string
	correspondence []string
	identityDocs   []string
}

// Words shared by every country's business names.
var (
	brandWords = []string{"Harbour", "Oakwood", "Meridian", "Northgate", "Bluebell", "Kestrel", "Ashford",
		"Granite", "Lantern", "Willow", "Summit", "Riverside", "Copper", "Falcon", "Beacon", "Thistle",
		"Pioneer", "Crescent", "Evergreen", "Maple", "Juniper", "Highfield", "Silverline", "Foxglove",
		"Ironbridge", "Redwood", "Larkspur", "Orchard", "Kingfisher", "Stonebridge", "Westbrook", "Brightwater"}
	tradeWords = []string{"Joinery", "Dental", "Logistics", "Consulting", "Bakery", "Architects", "Engineering",
		"Design", "Plumbing", "Veterinary", "Property", "Digital", "Catering", "Landscapes", "Motors", "Media",
		"Studios", "Electrical", "Physio", "Brewing", "Interiors", "Roofing", "Recruitment", "Software",
		"Optometry", "Fitness", "Coffee", "Print", "Removals", "Nurseries"}
	months = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

	workingPapers = []string{"Trial balance {year}.xlsx", "Fixed asset register {year}.xlsx",
		"Bank reconciliation {month} {year}.xlsx", "Tax computation {year}.xlsx",
		"Payroll reconciliation {year}.xlsx", "Lead schedules {year}.xlsx", "Review points {year}.docx"}
	statements = []string{"Financial statements {year}.pdf", "Management accounts {month} {year}.pdf",
		"Draft accounts {year}.pdf", "Cash flow forecast {year}.xlsx"}
	otherDocs = []string{"Meeting notes {date}.docx", "Board minutes {year}.pdf",
		"Signed authority form {year}.pdf", "Organisation chart {year}.pdf"}
)

// contactRoles are the roles a client's non-primary contacts can have.
var contactRoles = [numCategories][]string{
	individual:  {"spouse", "billing", "agent"},
	company:     {"director", "billing", "bookkeeper", "payroll", "company_secretary"},
	partnership: {"partner", "billing", "bookkeeper"},
	trust:       {"trustee", "billing", "beneficiary"},
	charity:     {"trustee", "treasurer", "bookkeeper", "billing"},
}

var uk = &country{
	code: "GB", currency: "GBP", tld: "co.uk", firmDomain: "%s-accountants.co.uk", paymentDue: 30, authority: "HMRC",
	mailHosts: []string{"btinternet.com", "gmail.com", "outlook.com", "yahoo.co.uk"},
	// Ofcom keeps these ranges free for fiction.
	phone: func(r *rand.Rand) string {
		return pick(r, []string{"+44 20 7946 0", "+44 161 496 0", "+44 113 496 0", "+44 7700 900"}) +
			fmt.Sprintf("%03d", r.IntN(1000))
	},
	firstNames: []string{"Oliver", "Amelia", "George", "Isla", "Harry", "Ava", "Jack", "Mia", "Charlie",
		"Grace", "Thomas", "Sophie", "James", "Emily", "William", "Ella", "Alfie", "Lucy", "Freddie", "Chloe",
		"Henry", "Poppy", "Samuel", "Ruby", "Joseph", "Evie", "Daniel", "Hannah", "Rhys", "Niamh", "Callum",
		"Eilidh", "Priya", "Arjun", "Aisha", "Imran", "Siobhan", "Owen", "Megan", "Fraser"},
	lastNames: []string{"Smith", "Jones", "Williams", "Taylor", "Brown", "Davies", "Evans", "Wilson",
		"Thomas", "Johnson", "Roberts", "Robinson", "Thompson", "Wright", "Walker", "White", "Edwards",
		"Hughes", "Green", "Hall", "Lewis", "Harris", "Clarke", "Patel", "Jackson", "Wood", "Turner",
		"Martin", "Cooper", "Hill", "Ward", "Morris", "Moore", "Clark", "Lee", "King", "Baker", "Harrison",
		"Morgan", "Allen", "James", "Scott", "Phillips", "Watson", "Davis", "Parker", "Price", "Bennett",
		"Young", "Griffiths", "Mitchell", "Kelly", "Cook", "Carter", "Richardson", "Bailey", "Collins",
		"Bell", "Shaw", "Murphy", "Khan", "MacDonald", "O'Brien", "Fletcher", "Ahmed"},
	towns: []string{"Harrogate", "Bath", "Chester", "Ludlow", "Whitby", "Kendal", "Truro", "Stroud",
		"Hexham", "Ely", "Marlow", "Buxton", "Frome", "Alnwick", "Keswick", "Totnes", "Didsbury", "Clapham",
		"Headingley", "Stamford"},
	clientNames: [numCategories][]string{
		individual:  {"{first} {last}"},
		company:     {"{last} & {last2} Ltd", "{brand} {trade} Ltd", "{town} {trade} Ltd", "{last} {trade} Ltd", "{brand} {trade} Services Ltd"},
		partnership: {"{last} & {last2} LLP", "{last} {last2} Partners LLP", "{brand} {trade} LLP"},
		trust:       {"The {last} Family Trust", "{last} Discretionary Settlement", "The {first} {last} Will Trust"},
		charity:     {"{town} Community Trust", "Friends of {town} Library", "{town} Food Bank", "{town} Youth Theatre"},
	},
	jobTypes: [numCategories][]jobType{
		individual: {{"Self Assessment 2025-26", []string{"2027-01-31"}}, {"Self Assessment 2024-25", []string{"2026-01-31"}},
			{"Self Assessment 2023-24", []string{"2025-01-31"}}, {"Capital gains tax report", nil}, {"Bookkeeping", nil}},
		company: {{"Year-end accounts", nil}, {"Corporation tax return", nil}, {"VAT return (Q1)", nil},
			{"VAT return (Q2)", nil}, {"VAT return (Q3)", nil}, {"VAT return (Q4)", nil}, {"Payroll (monthly)", nil},
			{"Bookkeeping", nil}, {"Confirmation statement", nil}, {"Management accounts", nil}},
		partnership: {{"Partnership tax return (SA800)", []string{"2025-01-31", "2026-01-31", "2027-01-31"}},
			{"Year-end accounts", nil}, {"VAT return (Q2)", nil}, {"VAT return (Q4)", nil}, {"Bookkeeping", nil}},
		trust: {{"Trust tax return (SA900)", []string{"2025-01-31", "2026-01-31", "2027-01-31"}}, {"Trust accounts", nil},
			{"Trust Registration Service update", nil}},
		charity: {{"Independent examination", nil}, {"Charity Commission annual return", nil},
			{"Payroll (monthly)", nil}, {"Bookkeeping", nil}},
	},
	scopes: [numCategories][]string{
		individual: {"Self Assessment {year}-{yy}|Tax return|Property income|Capital gains|Tax planning review",
			"Self Assessment {year}-{yy}|Tax return|Payments on account|HMRC correspondence"},
		company: {"Year ending 31 March {next}|Statutory accounts|Corporation tax return",
			"Bookkeeping and VAT {year}|Monthly bookkeeping|Quarterly VAT returns (MTD)|Statutory accounts",
			"Payroll {year}-{yy}|Monthly payroll|RTI submissions|Auto-enrolment pensions|P60s",
			"Year-end {year}|Year-end accounts|Corporation tax return|Confirmation statement|Directors' Self Assessment"},
		partnership: {"Partnership {year}-{yy}|Partnership accounts|SA800 partnership return|Partners' Self Assessment",
			"Bookkeeping and VAT {year}|Bookkeeping|Quarterly VAT returns|Partnership accounts"},
		trust: {"Trust {year}-{yy}|Trust accounts|SA900 trust tax return|R185 statements",
			"Trust {year}-{yy}|Trust Registration Service update|Trust tax return"},
		charity: {"Year ending 31 March {next}|Independent examination|Charity Commission annual return",
			"Charity {year}|Monthly bookkeeping|Payroll|Gift Aid claims|Trustees' report and accounts"},
	},
	rails: []weighted[string]{{"bank_transfer", 40}, {"gocardless", 25}, {"direct_debit", 15}, {"card", 10}, {"stripe", 10}},
	sourceDocs: []string{"Bank statements {month} {year}.pdf", "Sales invoices {month} {year}.xlsx",
		"Purchase receipts {month} {year}.pdf", "P60 {year}-{yy}.pdf", "P11D {year}-{yy}.pdf",
		"Mortgage interest statement {year}.pdf", "Dividend vouchers {year}-{yy}.pdf", "Rental income schedule {year}-{yy}.xlsx"},
	taxDocs: []string{"SA100 {year}-{yy}.pdf", "CT600 {year}.pdf", "VAT return Q{q} {year}.pdf",
		"SA800 {year}-{yy}.pdf", "Tax computation {year}.pdf"},
	correspondence: []string{"HMRC letter {date}.pdf", "Companies House reminder {year}.pdf",
		"Email - year-end queries.eml", "Client questionnaire {year}.docx", "HMRC statement of account {date}.pdf"},
	identityDocs: []string{"Passport - {contact}.pdf", "Proof of address - {contact}.pdf",
		"Driving licence - {contact}.jpg", "ID verification report - {contact}.pdf"},
}

var us = &country{
	code: "US", currency: "USD", tld: "com", firmDomain: "%scpa.com", paymentDue: 30, authority: "the IRS",
	mailHosts: []string{"gmail.com", "yahoo.com", "outlook.com", "icloud.com"},
	// 555-0100 to 555-0199 are reserved for fiction in every area code.
	phone: func(r *rand.Rand) string {
		return fmt.Sprintf("+1 %s 555 01%02d", pick(r, []string{"212", "312", "415", "512", "617", "303", "206", "404"}), r.IntN(100))
	},
	firstNames: []string{"Liam", "Olivia", "Noah", "Emma", "James", "Charlotte", "Benjamin", "Sophia",
		"Lucas", "Isabella", "Mason", "Harper", "Ethan", "Evelyn", "Logan", "Abigail", "Jackson", "Emily",
		"Aiden", "Madison", "Carter", "Avery", "Gabriel", "Ella", "Mateo", "Scarlett", "Jayden", "Grace",
		"Diego", "Camila", "Marcus", "Keisha", "Wei", "Mei", "Rahul", "Ananya", "Tyler", "Brooke"},
	lastNames: []string{"Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis",
		"Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor",
		"Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez", "Clark",
		"Ramirez", "Lewis", "Robinson", "Walker", "Young", "Allen", "King", "Wright", "Scott", "Torres",
		"Nguyen", "Hill", "Flores", "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell",
		"Mitchell", "Carter", "Roberts", "Chen", "Patel", "Kim", "Sullivan", "O'Connor", "Murphy", "Cohen",
		"Schmidt", "Kowalski", "Russo"},
	towns: []string{"Boulder", "Asheville", "Naperville", "Plano", "Bend", "Burlington", "Savannah",
		"Ann Arbor", "Santa Fe", "Madison", "Boise", "Chattanooga", "Tacoma", "Fort Collins", "Durham",
		"Scottsdale", "Provo", "Des Moines", "Evanston", "Pasadena"},
	clientNames: [numCategories][]string{
		individual:  {"{first} {last}"},
		company:     {"{last} & {last2} Inc.", "{brand} {trade} LLC", "{town} {trade} Inc.", "{last} {trade} LLC", "{brand} {trade} Group Inc."},
		partnership: {"{last} & {last2} LLP", "{last} {last2} Partners", "{brand} {trade} Partners LP"},
		trust:       {"The {last} Family Trust", "{first} {last} Revocable Trust", "{last} Irrevocable Trust"},
		charity:     {"{town} Community Foundation", "{town} Youth Soccer Association", "Friends of {town} Public Library", "{town} Food Pantry"},
	},
	jobTypes: [numCategories][]jobType{
		individual: {{"Form 1040", []string{"2025-04-15", "2025-10-15", "2026-04-15", "2027-04-15"}},
			{"Quarterly estimates", []string{"2025-06-16", "2025-09-15", "2026-01-15", "2026-04-15", "2026-06-15"}},
			{"Extension (Form 4868)", []string{"2025-04-15", "2026-04-15"}}, {"Bookkeeping", nil}},
		company: {{"Form 1120-S", []string{"2025-03-17", "2026-03-16", "2027-03-15"}}, {"Form 1120", []string{"2025-04-15", "2026-04-15"}},
			{"Quarterly estimates", nil}, {"Sales tax filing", nil}, {"Payroll (semi-monthly)", nil}, {"Bookkeeping", nil},
			{"Form 1099 filing", []string{"2025-01-31", "2026-02-02", "2027-02-01"}}, {"Year-end financial statements", nil}},
		partnership: {{"Form 1065", []string{"2025-03-17", "2026-03-16", "2027-03-15"}}, {"Bookkeeping", nil},
			{"Sales tax filing", nil}, {"Quarterly estimates", nil}},
		trust: {{"Form 1041", []string{"2025-04-15", "2026-04-15", "2027-04-15"}}, {"Trust accounting", nil}},
		charity: {{"Form 990", []string{"2025-05-15", "2026-05-15", "2027-05-17"}}, {"Audit preparation", nil},
			{"Bookkeeping", nil}, {"Payroll (semi-monthly)", nil}},
	},
	scopes: [numCategories][]string{
		individual: {"Tax year {year}|Form 1040|State income tax return|Schedules C and E",
			"Individual tax {year}|Form 1040|Quarterly estimated taxes|IRS notice support"},
		company: {"Tax year {year}|Form 1120-S|State franchise tax return|Shareholder K-1s",
			"Bookkeeping {year}|Monthly bookkeeping|Bank reconciliations|Quarterly sales tax filings",
			"Payroll {year}|Semi-monthly payroll|Forms 941 and 940|W-2 and 1099 filing",
			"Fiscal year {year}|Financial statements|Corporate tax return|Tax planning meeting"},
		partnership: {"Tax year {year}|Form 1065|Partner K-1s|State composite returns",
			"Bookkeeping {year}|Monthly bookkeeping|Partners' estimated taxes"},
		trust: {"Tax year {year}|Form 1041|Beneficiary K-1s",
			"Trust {year}|Fiduciary accounting|Form 1041"},
		charity: {"Fiscal year {year}|Form 990|State charitable registration",
			"Fiscal year {year}|Monthly bookkeeping|Grant tracking|Audit preparation"},
	},
	rails: []weighted[string]{{"ach", 45}, {"card", 20}, {"check", 15}, {"stripe", 15}, {"bank_transfer", 5}},
	sourceDocs: []string{"Bank statements {month} {year}.pdf", "W-2 {year}.pdf", "1099-NEC {year}.pdf",
		"1099-INT {year}.pdf", "Form 1098 {year}.pdf", "Receipts {month} {year}.pdf", "Brokerage 1099-B {year}.pdf",
		"Sales report {month} {year}.xlsx"},
	taxDocs: []string{"Form 1040 {year}.pdf", "Form 1120-S {year}.pdf", "Form 1065 {year}.pdf",
		"Form 941 Q{q} {year}.pdf", "State return {year}.pdf"},
	correspondence: []string{"IRS notice CP2000 {year}.pdf", "State franchise tax notice {year}.pdf",
		"Email - organizer follow-up.eml", "Tax organizer {year}.pdf", "IRS letter {date}.pdf"},
	identityDocs: []string{"Passport - {contact}.pdf", "Driver's license - {contact}.jpg",
		"Form 8821 - {contact}.pdf", "ID verification report - {contact}.pdf"},
}

var au = &country{
	code: "AU", currency: "AUD", tld: "com.au", firmDomain: "%saccounting.com.au", paymentDue: 14, authority: "the ATO",
	mailHosts: []string{"bigpond.com", "gmail.com", "outlook.com.au", "optusnet.com.au"},
	// ACMA keeps 5550 xxxx landlines free for fiction.
	phone: func(r *rand.Rand) string {
		return pick(r, []string{"+61 2 5550 ", "+61 3 5550 ", "+61 7 5550 ", "+61 8 5550 "}) + fmt.Sprintf("%04d", r.IntN(10000))
	},
	firstNames: []string{"Jack", "Charlotte", "William", "Olivia", "Oliver", "Amelia", "Noah", "Isla",
		"Thomas", "Mia", "Lachlan", "Chloe", "Cooper", "Matilda", "Riley", "Ruby", "Hamish", "Zoe", "Liam",
		"Grace", "Ethan", "Sienna", "Lucas", "Harper", "Kai", "Ava", "Nikolaos", "Mei", "Tuan", "Priya"},
	lastNames: []string{"Smith", "Jones", "Williams", "Brown", "Wilson", "Taylor", "Johnson", "White",
		"Martin", "Anderson", "Thompson", "Nguyen", "Thomas", "Walker", "Harris", "Lee", "Ryan", "Robinson",
		"Kelly", "King", "Davis", "Wright", "Evans", "Roberts", "Green", "Hall", "Wood", "Jackson", "Clarke",
		"Patel", "Papadopoulos", "Tran", "Murphy", "O'Neill", "Campbell", "Mitchell", "Hughes", "Russo",
		"Chen", "Wang"},
	towns: []string{"Fremantle", "Ballarat", "Bendigo", "Toowoomba", "Geelong", "Newcastle", "Wollongong",
		"Launceston", "Cairns", "Mildura", "Orange", "Bunbury", "Byron Bay", "Noosa", "Albury"},
	clientNames: [numCategories][]string{
		individual:  {"{first} {last}"},
		company:     {"{last} & {last2} Pty Ltd", "{brand} {trade} Pty Ltd", "{town} {trade} Pty Ltd", "{last} {trade} Pty Ltd"},
		partnership: {"{last} & {last2} Partners", "{brand} {trade} Partnership"},
		trust:       {"{last} Family Trust", "{last} Discretionary Trust", "{last} Superannuation Fund"},
		charity:     {"{town} Community Association Inc.", "{town} Surf Life Saving Club Inc.", "{town} Men's Shed Inc."},
	},
	jobTypes: [numCategories][]jobType{
		individual: {{"Individual tax return", []string{"2025-05-15", "2025-10-31", "2026-05-15", "2026-10-31", "2027-05-15"}},
			{"Bookkeeping", nil}},
		company: {{"BAS lodgement", nil}, {"Company tax return", []string{"2025-05-15", "2026-05-15", "2027-05-17"}},
			{"Payroll (STP)", nil}, {"Bookkeeping", nil}, {"Financial statements", nil}, {"ASIC annual review", nil}},
		partnership: {{"Partnership tax return", []string{"2025-05-15", "2026-05-15", "2027-05-17"}}, {"BAS lodgement", nil}, {"Bookkeeping", nil}},
		trust: {{"Trust tax return", []string{"2025-05-15", "2026-05-15", "2027-05-17"}}, {"Trustee resolutions", []string{"2025-06-30", "2026-06-30"}},
			{"BAS lodgement", nil}},
		charity: {{"ACNC annual information statement", nil}, {"Bookkeeping", nil}, {"BAS lodgement", nil}},
	},
	scopes: [numCategories][]string{
		individual: {"Year ending 30 June {next}|Individual tax return|Rental property schedules",
			"Individual tax {year}-{yy}|Individual tax return|Work-related deductions review|ATO correspondence"},
		company: {"Year ending 30 June {next}|Quarterly BAS|Financial statements|Company tax return",
			"Bookkeeping {year}-{yy}|Monthly bookkeeping|Single Touch Payroll|Superannuation reporting",
			"Company {year}-{yy}|Financial statements|Company tax return|ASIC annual review"},
		partnership: {"Year ending 30 June {next}|Partnership tax return|Quarterly BAS",
			"Partnership {year}-{yy}|Bookkeeping|BAS|Financial statements"},
		trust: {"Year ending 30 June {next}|Trust tax return|Trustee resolutions|Distribution minutes",
			"Fund {year}-{yy}|Financial statements|Tax return|Audit liaison"},
		charity: {"Charity {year}-{yy}|ACNC annual information statement|Financial report",
			"Bookkeeping {year}-{yy}|Monthly bookkeeping|Quarterly BAS"},
	},
	rails: []weighted[string]{{"bank_transfer", 55}, {"direct_debit", 20}, {"card", 15}, {"stripe", 10}},
	sourceDocs: []string{"Bank statements {month} {year}.pdf", "Income statement {year}.pdf",
		"Receipts {month} {year}.pdf", "Private health insurance statement {year}.pdf",
		"Rental property statement {year}.pdf", "Sales report {month} {year}.xlsx"},
	taxDocs: []string{"Individual tax return {year}.pdf", "BAS Q{q} {year}.pdf", "Company tax return {year}.pdf",
		"Trust tax return {year}.pdf"},
	correspondence: []string{"ATO notice of assessment {year}.pdf", "ASIC annual statement {year}.pdf",
		"Email - BAS queries.eml", "ATO letter {date}.pdf"},
	identityDocs: []string{"Passport - {contact}.pdf", "Driver licence - {contact}.jpg",
		"Medicare card - {contact}.jpg", "ID verification report - {contact}.pdf"},
}

// style is one firm's country and document store.
type style struct {
	*country
	slug     string // "acme" for frm_acme
	domain   string // the firm's email domain
	provider string // document store
	driveID  string // SharePoint or Google shared drive id, fixed per firm
}

// styleFor picks a firm's style. The two default demo firms are fixed; any
// other firm gets a country by hash, so it stays the same on every start.
func styleFor(firm string) *style {
	slug := slugify(strings.TrimPrefix(firm, "frm_"))
	if slug == "" {
		slug = "firm"
	}
	st := &style{slug: slug, provider: "dropbox"}
	r := rand.New(rand.NewPCG(seedOf(firm, "style")))
	switch firm {
	case "frm_acme":
		st.country, st.provider = uk, "sharepoint"
		st.driveID = "b!" + randomString(r, base64URL, 64)
	case "frm_birch":
		st.country, st.provider = us, "google_drive"
		st.driveID = "0A" + randomString(r, base64URL, 11) + "Uk9PVA"
	default:
		h := fnv.New32a()
		h.Write([]byte(firm))
		st.country = []*country{uk, us, au}[h.Sum32()%3]
	}
	st.domain = fmt.Sprintf(st.firmDomain, slug)
	return st
}

const (
	base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	base32Std = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
)

func randomString(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// slugify keeps the lowercase letters and digits of s, for email and web
// domains.
func slugify(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

func pickWeighted[T any](r *rand.Rand, list []weighted[T]) T {
	total := 0
	for _, w := range list {
		total += w.weight
	}
	n := r.IntN(total)
	for _, w := range list {
		if n < w.weight {
			return w.value
		}
		n -= w.weight
	}
	return list[len(list)-1].value
}
