package main

import (
	"fmt"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

func main() {
	p := message.NewPrinter(language.English)
	for _, v := range []any{0, 1, -1, 999, 1000, -1234567, 1e6, 1e5, 123456.5, 0.0001, 0.00001, 1e21, 1.5e-7, -2.5, 3.0, 1e100, 12345678.9, 0.1 + 0.2, 1e-300, 5e-324} {
		fmt.Printf("%T %q\n", v, p.Sprintf("%v|%d", v, v))
	}
	fmt.Printf("%q\n", p.Sprintf("%v %v", []int{1000, 2}, fmt.Sprint(1000)))
	var f float64 = 0
	fmt.Printf("%q\n", p.Sprintf("%v %v", f/f, 1/f))
}
