import json, random
random.seed(7)
pools = ["a","b","Z","x","hello","The","don","'","'s","'S","'re","'LL","'ſ","ſ"," ","  ","\t","\n","\r\n","\r","\u00a0","\u3000","\u2028","\u200b","\u0085","1","23","٣","Ⅻ","½","!","?","...","-----","(",")","{","}","\"","é","e\u0301","Å","ﬁ","你好","世界","😀","👍🏽","🇫🇷","مرحبا","नमस्ते","ß","İ","<|im_end|>","<think>","</think>","<tool_call>","<|im_start|>","<|endoftext|>","<","|",">","\x00","\x1f","\x7f","\ufeff","§","€","$","_","__init__","x=1;","\u00ad","Ǆ","ǅ","\u0300","\u0345","ᾳ","\U0001d400","𝟘"]
cases=[]
for n in range(3000):
    k=random.randint(1,12)
    cases.append("".join(random.choice(pools) for _ in range(k)))
for n in range(200):
    cases.append("".join(chr(random.choice([random.randint(0x20,0x7e),random.randint(0xa0,0x2fff),random.randint(0x3000,0xd7ff),random.randint(0xe000,0xffff),random.randint(0x10000,0x1ffff)])) for _ in range(random.randint(1,30))))
cases.append(" "*1000+"x")
cases.append("a"*700)
cases.append("你"*400)
with open("cases.jsonl","w") as f:
    for c in cases: f.write(json.dumps(c)+"\n")
