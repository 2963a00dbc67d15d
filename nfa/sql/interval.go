package sql

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// defaultIntervalPrecision is the SQL default leading-field precision:
// INTERVAL '100' MINUTE is an error, INTERVAL '100' MINUTE(3) is not.
const defaultIntervalPrecision = 2

// Interval fields of each family, coarsest first, and the separator that
// precedes each field in the literal text.
var (
	dayTimeFields = []Unit{UnitDay, UnitHour, UnitMinute, UnitSecond}
	fieldSep      = map[Unit]string{UnitHour: " ", UnitMinute: ":", UnitSecond: ":", UnitMonth: "-"}
	fieldMax      = map[Unit]int64{UnitHour: 23, UnitMinute: 59, UnitSecond: 59, UnitMonth: 11}
	fieldLetter   = map[Unit]string{UnitYear: "y", UnitMonth: "m", UnitDay: "d", UnitHour: "h", UnitMinute: "m", UnitSecond: "s"}
	unitMillis    = map[Unit]int64{UnitDay: 86_400_000, UnitHour: 3_600_000, UnitMinute: 60_000, UnitSecond: 1000, UnitMillisecond: 1, UnitWeek: 7 * 86_400_000}
)

// evalInterval checks iv's text against its qualifier and sets Millis or
// Months. It returns an error message, "" if the literal is valid.
func evalInterval(iv *Interval) string {
	from, to := iv.From, iv.To
	qual := from.String()
	if to != UnitNone {
		qual += " TO " + to.String()
	}
	var fields []Unit
	switch {
	case from == UnitMicrosecond || from == UnitNanosecond || to == UnitMicrosecond || to == UnitNanosecond:
		return fmt.Sprintf("interval unit %s is not supported; the finest interval unit is MILLISECOND", qual)
	case to == UnitNone:
		fields = []Unit{from}
	case from == UnitYear && to == UnitMonth:
		fields = []Unit{UnitYear, UnitMonth}
	default:
		fi, ti := indexUnit(dayTimeFields, from), indexUnit(dayTimeFields, to)
		if fi < 0 || ti <= fi {
			return fmt.Sprintf("invalid interval qualifier %s: write YEAR TO MONTH, DAY TO HOUR|MINUTE|SECOND, HOUR TO MINUTE|SECOND or MINUTE TO SECOND", qual)
		}
		fields = dayTimeFields[fi : ti+1]
	}
	last := fields[len(fields)-1]

	s := strings.TrimSpace(iv.Value)
	neg := iv.Negative
	if strings.HasPrefix(s, "-") {
		neg = !neg
		s = s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	format := intervalFormat(fields)
	bad := func() string {
		return fmt.Sprintf("illegal interval literal '%s' for %s: expected '%s'", iv.Value, qual, format)
	}
	values := make([]int64, len(fields))
	var fracMillis int64
	i := 0
	readNum := func() (int64, int, bool) {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || j-i > 18 {
			return 0, 0, false
		}
		v, err := strconv.ParseInt(s[i:j], 10, 64)
		n := j - i
		i = j
		return v, n, err == nil
	}
	for k, f := range fields {
		if k > 0 {
			sep := fieldSep[f]
			if !strings.HasPrefix(s[i:], sep) {
				return bad()
			}
			i += len(sep)
			if sep == " " {
				for i < len(s) && s[i] == ' ' {
					i++
				}
			}
		}
		v, _, ok := readNum()
		if !ok {
			return bad()
		}
		values[k] = v
	}
	if last == UnitSecond && i < len(s) && s[i] == '.' {
		i++
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		frac := s[i:j]
		if frac == "" {
			return bad()
		}
		if len(frac) > 3 && strings.Trim(frac[3:], "0") != "" {
			return fmt.Sprintf("interval literal '%s' is finer than a millisecond", iv.Value)
		}
		frac = (frac + "00")[:3]
		fracMillis, _ = strconv.ParseInt(frac, 10, 64)
		i = j
	}
	if i != len(s) {
		return bad()
	}

	// Leading field precision (not for the MILLISECOND and WEEK extensions).
	lead := fields[0]
	if u := unitMillis[lead]; u > 0 && values[0] > (1<<62)/u {
		return fmt.Sprintf("interval literal '%s' %s is too large", iv.Value, qual)
	}
	if lead != UnitMillisecond && lead != UnitWeek {
		prec := iv.Precision
		if prec == 0 {
			prec = defaultIntervalPrecision
		}
		limit := int64(1)
		for range prec {
			limit *= 10
		}
		if values[0] >= limit {
			return fmt.Sprintf("interval field value %d exceeds precision of %s(%d) field; write %s(%d) for a larger value", values[0], lead, prec, lead, len(strconv.FormatInt(values[0], 10)))
		}
	}
	for k := 1; k < len(fields); k++ {
		if max := fieldMax[fields[k]]; values[k] > max {
			return fmt.Sprintf("illegal interval literal '%s': %s field value %d is out of range 0-%d", iv.Value, fields[k], values[k], max)
		}
	}

	sign := int64(1)
	if neg {
		sign = -1
	}
	iv.Negative = neg
	switch lead {
	case UnitYear:
		m := values[0] * 12
		if len(values) > 1 {
			m += values[1]
		}
		iv.Months = sign * m
	case UnitQuarter:
		iv.Months = sign * values[0] * 3
	case UnitMonth:
		iv.Months = sign * values[0]
	default:
		var ms int64
		for k, f := range fields {
			ms += values[k] * unitMillis[f]
		}
		iv.Millis = sign * (ms + fracMillis)
	}
	return ""
}

func indexUnit(us []Unit, u Unit) int {
	for i, x := range us {
		if x == u {
			return i
		}
	}
	return -1
}

// intervalFormat describes the expected literal text, e.g. "d h:m:s[.fff]".
func intervalFormat(fields []Unit) string {
	var b strings.Builder
	for k, f := range fields {
		if k > 0 {
			b.WriteString(fieldSep[f])
		}
		if l, ok := fieldLetter[f]; ok {
			b.WriteString(l)
		} else {
			b.WriteString("n")
		}
	}
	if fields[len(fields)-1] == UnitSecond {
		b.WriteString("[.fff]")
	}
	return b.String()
}

func validTimeText(layout, s string) bool {
	_, err := time.Parse(layout, s)
	return err == nil
}
