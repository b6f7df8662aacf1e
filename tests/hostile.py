"""Hostile token texts: what an agent trace may carry that must never execute in the browser."""

HOSTILE = [
    "<script>document.title='PWNED'</script>",
    '" onmouseover="document.title=\'PWNED\'" x="',
    "<img src=x onerror=\"document.title='PWNED'\">",
    "${Object.assign(document,{title:String.fromCharCode(80,87,78)})}",
    "{{constructor.constructor('document.title=1')()}}",
    "</script><script>alert(1)</script>",
    "`backtick` 'single' \"double\"",
    "\\d+ path\\nname",
    "&amp; &lt;b&gt;",
    "\u200b\u200e\u202eRTL",
    "<svg/onload=document.title='PWNED'>",
    "<iframe srcdoc='<script>parent.document.title=1</script>'>",
]
